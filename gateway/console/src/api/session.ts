// REPLACE once console-auth is merged: these routes come from CONSOLE-CONTRACT.md and are not yet in
// this branch's OpenAPI document; when they are, use `api` from ./client with the generated types.
import { request } from './client';

export interface TeamRef {
  id: string;
  name: string;
}
export interface Session {
  user: { id: string; email: string; name: string | null };
  team: TeamRef;
  teams: TeamRef[];
  expiresAt: string;
}
export interface TeamUser {
  id: string;
  email: string;
  name: string | null;
  createdAt: string;
}
export interface Invite {
  id: string;
  email: string;
  createdAt: string;
  expiresAt: string;
  acceptedAt: string | null;
}
export interface CreatedInvite {
  id: string;
  email: string;
  url: string;
  expiresAt: string;
  mailed: boolean;
}
export type DkimResult = 'pass' | 'fail' | 'none' | 'neutral' | 'temperror' | 'permerror';
export interface InboxItem {
  id: string;
  receivedAt: string;
  from: string;
  to: string[];
  subject: string;
  size: number;
  dkim: DkimResult;
}
export interface InboxMessage {
  id: string;
  receivedAt: string;
  from: string;
  to: string[];
  subject: string;
  headers: { name: string; value: string }[];
  html: string | null;
  text: string | null;
  dkim: { result: DkimResult; domain: string | null; selector: string | null };
  simulator: string | null;
}

export const sessionApi = {
  get: () => request<Session>('GET', '/v1/session'),
  signIn: (email: string, password: string) => request<Session>('POST', '/v1/session', { email, password }),
  switchTeam: (teamId: string) => request<Session>('PATCH', '/v1/session', { teamId }),
  signOut: () => request<void>('DELETE', '/v1/session'),
  acceptInvite: (token: string, password: string, name?: string) =>
    request<Session>('POST', '/v1/invites/accept', { token, password, ...(name ? { name } : {}) }),
  users: () => request<{ data: TeamUser[] }>('GET', '/v1/users'),
  removeUser: (id: string) => request<{ success: true }>('DELETE', `/v1/users/${encodeURIComponent(id)}`),
  invites: () => request<{ data: Invite[] }>('GET', '/v1/invites'),
  invite: (email: string) => request<CreatedInvite>('POST', '/v1/invites', { email }),
  deleteInvite: (id: string) => request<{ success: true }>('DELETE', `/v1/invites/${encodeURIComponent(id)}`),
  inbox: (cursor?: string) =>
    request<{ data: InboxItem[]; nextCursor: string | null }>('GET', `/v1/dev/inbox?limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`),
  inboxMessage: (id: string) => request<InboxMessage>('GET', `/v1/dev/inbox/${encodeURIComponent(id)}`),
};
