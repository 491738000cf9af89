import { describe, expect, it } from 'vitest';
import { createAuthCache } from '../../src/clients/auth-cache.js';
import type { Principal } from '../../src/plugins/auth.plugin.js';

function setup() {
  let t = 1_000_000;
  const calls = { count: 0 };
  const cache = createAuthCache(async (token) => {
    calls.count++;
    return { teamId: 'team_1', keyId: `key_${token}`, userId: 'u', permission: 'FULL' } satisfies Principal;
  }, { ttlMs: 30_000, unheardTtlMs: 1_000, now: () => t });
  return { cache, calls, advance: (ms: number) => { t += ms; } };
}

describe('auth cache', () => {
  it('keeps a key for its TTL while revocations are heard, and drops it on revocation', async () => {
    const { cache, calls, advance } = setup();
    cache.setTrusted(true);
    await cache.authenticate('a');
    advance(29_000);
    await cache.authenticate('a');
    expect(calls.count).toBe(1);
    cache.revokeKey('key_a');
    await cache.authenticate('a');
    expect(calls.count).toBe(2);
  });

  it('falls back to the short bound (not a bypass) while revocations are not heard', async () => {
    const { cache, calls, advance } = setup();
    await cache.authenticate('a');
    advance(500);
    await cache.authenticate('a');
    expect(calls.count).toBe(1);
    advance(600);
    await cache.authenticate('a');
    expect(calls.count).toBe(2);
  });

  it('holds an entry cached while heard to the short bound once the lease lapses', async () => {
    const { cache, calls, advance } = setup();
    cache.trustFor(1_000);
    await cache.authenticate('a');
    advance(900);
    cache.trustFor(1_000);
    advance(900);
    await cache.authenticate('a');
    expect(calls.count).toBe(1);
    // No renewal: past the lease, the 1.8 s old entry is beyond the short bound.
    advance(200);
    expect(cache.trusted).toBe(false);
    await cache.authenticate('a');
    expect(calls.count).toBe(2);
  });

  it('does not give the long TTL back to entries cached before a gap in hearing', async () => {
    const { cache, calls, advance } = setup();
    cache.setTrusted(true);
    await cache.authenticate('a');
    cache.setTrusted(false);
    cache.setTrusted(true);
    advance(2_000);
    // A revocation may have been missed during the gap: auth is asked again.
    await cache.authenticate('a');
    expect(calls.count).toBe(2);
    advance(20_000);
    await cache.authenticate('a');
    expect(calls.count).toBe(2);
  });
});
