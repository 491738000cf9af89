import { InvalidArgumentError } from '@mailfleet/kit';
import { describe, expect, it } from 'vitest';
import { createEndpointClient, type Resolver } from '../../src/clients/endpoint.client.js';
import { parseWebhookUrl } from '../../src/domain/urls.js';

// Only refusals are exercised here: they happen before any connection, so no I/O.
const base = { timeoutMs: 1_000, responseTextLimit: 1_024 };

function resolverFrom(answers: string[][]): Resolver & { calls: number } {
  const state = { calls: 0 };
  const resolve: Resolver = async () => {
    const next = answers[Math.min(state.calls, answers.length - 1)]!;
    state.calls++;
    return next.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.defineProperty(resolve, 'calls', { get: () => state.calls }) as Resolver & { calls: number };
}

describe('endpoint client SSRF guard', () => {
  it('refuses private literals and names resolving to private addresses at create time', async () => {
    const client = createEndpointClient({ ...base, allowPrivateNetworks: false, resolver: resolverFrom([['10.0.0.7']]) });
    await expect(client.vet(parseWebhookUrl('https://127.0.0.1:8443/hook'))).rejects.toThrow(/127\.0\.0\.1 is a loopback address/);
    await expect(client.vet(parseWebhookUrl('https://[::1]/hook'))).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(client.vet(parseWebhookUrl('https://169.254.169.254/latest'))).rejects.toThrow(/metadata/);
    await expect(client.vet(parseWebhookUrl('https://internal.example.com/'))).rejects.toThrow(/internal\.example\.com resolves to 10\.0\.0\.7, a private address/);
  });

  it('refuses when ANY address of the name is private', async () => {
    const client = createEndpointClient({ ...base, allowPrivateNetworks: false, resolver: resolverFrom([['93.184.216.34', '127.0.0.1']]) });
    await expect(client.vet(parseWebhookUrl('https://mixed.example.com/'))).rejects.toThrow(/loopback/);
  });

  it('accepts public and unresolvable names (each attempt checks again)', async () => {
    const ok = createEndpointClient({ ...base, allowPrivateNetworks: false, resolver: resolverFrom([['93.184.216.34', '2606:4700::1']]) });
    await expect(ok.vet(parseWebhookUrl('https://hooks.example.com/'))).resolves.toBeUndefined();
    const unresolvable = createEndpointClient({ ...base, allowPrivateNetworks: false, resolver: async () => { throw new Error('ENOTFOUND'); } });
    await expect(unresolvable.vet(parseWebhookUrl('https://not-yet.example.com/'))).resolves.toBeUndefined();
  });

  it('re-checks at delivery after resolving: a name that now points inside is refused without a connection', async () => {
    const resolver = resolverFrom([['93.184.216.34'], ['169.254.169.254']]);
    const client = createEndpointClient({ ...base, allowPrivateNetworks: false, resolver });
    const target = parseWebhookUrl('https://rebind.example.com/hook');
    await client.vet(target);
    const result = await client.post(target, '{}', {});
    expect(result).toMatchObject({ ok: false, error: 'refused: rebind.example.com resolves to 169.254.169.254, a metadata address; webhooks may only reach public addresses' });
    expect(result.status).toBeUndefined();
    expect(resolver.calls).toBe(2);
  });

  it('attempts to one host within a second share a lookup, and each still checks its addresses; a failed lookup is not kept', async () => {
    const resolver = resolverFrom([['10.0.0.7'], ['93.184.216.34']]);
    const client = createEndpointClient({ ...base, allowPrivateNetworks: false, resolver });
    const target = parseWebhookUrl('https://busy.example.com/hook');
    const results = await Promise.all([client.post(target, '{}', {}), client.post(target, '{}', {}), client.post(target, '{}', {})]);
    expect(results.map((r) => r.error)).toEqual(Array(3).fill('refused: busy.example.com resolves to 10.0.0.7, a private address; webhooks may only reach public addresses'));
    expect(resolver.calls).toBe(1);
    // Another host is looked up on its own.
    await client.post(parseWebhookUrl('https://other.example.com/hook'), '{}', {});
    expect(resolver.calls).toBe(2);
    let calls = 0;
    const failing = createEndpointClient({ ...base, allowPrivateNetworks: false, resolver: async () => { calls++; throw new Error('ENOTFOUND'); } });
    await failing.post(target, '{}', {});
    await failing.post(target, '{}', {});
    expect(calls).toBe(2);
    // Once the second has passed the name is looked up again, and what it says now is checked.
    const again = resolverFrom([['10.0.0.7'], ['169.254.169.254']]);
    const later = createEndpointClient({ ...base, allowPrivateNetworks: false, resolver: again });
    await later.post(target, '{}', {});
    await new Promise((r) => setTimeout(r, 1_050));
    expect((await later.post(target, '{}', {})).error).toMatch(/resolves to 169\.254\.169\.254, a metadata address/);
    expect(again.calls).toBe(2);
  });

  it('an attempt after the shared lookup answered takes that answer at once, and still checks it', async () => {
    const resolver = resolverFrom([['10.0.0.7'], ['93.184.216.34']]);
    const client = createEndpointClient({ ...base, allowPrivateNetworks: false, resolver });
    const target = parseWebhookUrl('https://answered.example.com/hook');
    const refused = 'refused: answered.example.com resolves to 10.0.0.7, a private address; webhooks may only reach public addresses';
    expect((await client.post(target, '{}', {})).error).toBe(refused);
    // The answer is in: these do not wait for a lookup, and each is refused by its own check.
    expect((await client.post(target, '{}', {})).error).toBe(refused);
    expect((await client.post(target, '{}', {})).error).toBe(refused);
    expect(resolver.calls).toBe(1);
  });

  it('with private networks allowed nothing is refused at create time', async () => {
    const client = createEndpointClient({ ...base, allowPrivateNetworks: true, resolver: resolverFrom([['127.0.0.1']]) });
    await expect(client.vet(parseWebhookUrl('https://127.0.0.1:8443/'))).resolves.toBeUndefined();
    await expect(client.vet(parseWebhookUrl('https://localhost:8443/'))).resolves.toBeUndefined();
  });

  it('a resolver slower than the time limit fails the attempt as a time-out', async () => {
    const client = createEndpointClient({ ...base, timeoutMs: 50, allowPrivateNetworks: false, resolver: () => new Promise(() => undefined) });
    expect(await client.post(parseWebhookUrl('https://slow-dns.example.com/'), '{}', {})).toMatchObject({ ok: false, error: 'timed out after 50 ms' });
  });
});
