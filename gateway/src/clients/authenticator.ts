import { authV1 } from '@mailfleet/proto';
import type { Authenticator, Permission } from '../plugins/auth.plugin.js';
import type { Upstreams } from './upstreams.js';

export function permissionName(p: authV1.Permission): Permission {
  return p === authV1.Permission.PERMISSION_SENDING ? 'SENDING' : 'FULL';
}

/** Resolves bearer keys through the auth service. */
export function createAuthAuthenticator(upstreams: Pick<Upstreams, 'auth'>): Authenticator {
  return async (token) => {
    const res = await upstreams.auth.call.authenticateKey({ token });
    return { teamId: res.teamId, keyId: res.keyId, userId: res.userId, permission: permissionName(res.permission), domainId: res.domainId };
  };
}
