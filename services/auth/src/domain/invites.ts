import { randomBase62 } from '@mailfleet/kit';

export const INVITE_PREFIX = 'mfi_';
const INVITE_PATTERN = /^mfi_[0-9A-Za-z]{43}$/;
export const INVITE_TTL_MS = 7 * 86_400_000;

export function generateInviteToken(): string {
  return `${INVITE_PREFIX}${randomBase62(43)}`; // ~256 bits; stored as its SHA-256 like session tokens
}

export function looksLikeInviteToken(token: string): boolean {
  return INVITE_PATTERN.test(token);
}

export interface InviteState {
  readonly expiresAt: Date;
  readonly acceptedAt?: Date | undefined;
  readonly deletedAt?: Date | undefined;
}

/** An invite works once, until it expires or is withdrawn. */
export function inviteUsable(i: InviteState, now: Date): boolean {
  return !i.acceptedAt && !i.deletedAt && now.getTime() < i.expiresAt.getTime();
}
