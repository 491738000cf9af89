// Sessions, the team's people and the dev inbox (CONSOLE-CONTRACT.md), typed from the generated schema.
import { api, unwrap } from './client';
import type { paths } from './schema';

type Json<P extends keyof paths, M extends keyof paths[P], C extends number> = paths[P][M] extends {
  responses: { [K in C]: { content: { 'application/json': infer T } } };
}
  ? T
  : never;

export type Session = Json<'/v1/session', 'get', 200>;
export type TeamRef = Session['team'];
export type TeamUser = Json<'/v1/users', 'get', 200>['data'][number];
export type Invite = Json<'/v1/invites', 'get', 200>['data'][number];
export type CreatedInvite = Json<'/v1/invites', 'post', 201>;
export type InboxItem = Json<'/v1/dev/inbox', 'get', 200>['data'][number];
export type InboxMessage = Json<'/v1/dev/inbox/{id}', 'get', 200>;
export type DkimResult = InboxItem['dkim'];

const byId = (id: string) => ({ params: { path: { id } } });

export const sessionApi = {
  get: () => unwrap(api.GET('/v1/session')),
  signIn: (email: string, password: string) => unwrap(api.POST('/v1/session', { body: { email, password } })),
  switchTeam: (teamId: string) => unwrap(api.PATCH('/v1/session', { body: { teamId } })),
  signOut: () => unwrap(api.DELETE('/v1/session')),
  acceptInvite: (token: string, password: string, name?: string) =>
    unwrap(api.POST('/v1/invites/accept', { body: { token, password, ...(name ? { name } : {}) } })),
  users: () => unwrap(api.GET('/v1/users')),
  removeUser: (id: string) => unwrap(api.DELETE('/v1/users/{id}', byId(id))),
  invites: () => unwrap(api.GET('/v1/invites')),
  invite: (email: string) => unwrap(api.POST('/v1/invites', { body: { email } })),
  deleteInvite: (id: string) => unwrap(api.DELETE('/v1/invites/{id}', byId(id))),
  inbox: (cursor?: string) => unwrap(api.GET('/v1/dev/inbox', { params: { query: { limit: 50, ...(cursor ? { cursor } : {}) } } })),
  inboxMessage: (id: string) => unwrap(api.GET('/v1/dev/inbox/{id}', byId(id))),
};
