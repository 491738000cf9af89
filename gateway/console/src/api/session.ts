// /v1/session is generated (schema.ts). REPLACE the rest once console-auth's stage 2 is merged: users,
// invites and the dev inbox are typed here from CONSOLE-CONTRACT.md until they are in the OpenAPI document.
import { api, request, unwrap } from './client';
import type { paths } from './schema';

export type Session = paths['/v1/session']['get']['responses'][200]['content']['application/json'];
export type TeamRef = Session['team'];
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
  get: () => unwrap(api.GET('/v1/session')),
  signIn: (email: string, password: string) => unwrap(api.POST('/v1/session', { body: { email, password } })),
  switchTeam: (teamId: string) => unwrap(api.PATCH('/v1/session', { body: { teamId } })),
  signOut: () => unwrap(api.DELETE('/v1/session')),
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
