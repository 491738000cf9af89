import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoPath as healthProtoPath } from 'grpc-health-check';
import { childLogs, startChild, stopChild } from '@mailfleet/testkit';
import { describe, expect, inject, it } from 'vitest';

const SERVICES = ['auth', 'domains', 'contacts', 'emails', 'campaigns', 'suppressions', 'webhooks', 'analytics'] as const;

type HealthClient = grpc.Client & { check(r: { service: string }, cb: (e: grpc.ServiceError | null, r: { status: string }) => void): void };
const healthPkg = grpc.loadPackageDefinition(protoLoader.loadSync(healthProtoPath, { enums: String })) as unknown as {
  grpc: { health: { v1: { Health: new (a: string, c: grpc.ChannelCredentials) => HealthClient } } };
};

function check(port: number, service = ''): Promise<string> {
  const c = new healthPkg.grpc.health.v1.Health(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    c.check({ service }, (e, r) => {
      c.close();
      if (e) reject(e);
      else resolve(r.status);
    });
  });
}

/** Lists services through gRPC server reflection (v1), as grpcurl would. */
function listServices(port: number): Promise<string[]> {
  const reflectionProto = protoLoader.loadSync('grpc/reflection/v1/reflection.proto', {
    includeDirs: [new URL('../../../../node_modules/@grpc/reflection/build/proto', import.meta.url).pathname],
  });
  const pkg = grpc.loadPackageDefinition(reflectionProto) as unknown as {
    grpc: { reflection: { v1: { ServerReflection: new (a: string, c: grpc.ChannelCredentials) => grpc.Client & { serverReflectionInfo(): grpc.ClientDuplexStream<unknown, { listServicesResponse?: { service: { name: string }[] } }> } } } };
  };
  const client = new pkg.grpc.reflection.v1.ServerReflection(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const call = client.serverReflectionInfo();
    call.on('data', (msg) => {
      resolve((msg.listServicesResponse?.service ?? []).map((s: { name: string }) => s.name));
      call.end();
      client.close();
    });
    call.on('error', reject);
    call.write({ listServices: '' });
  });
}

describe('the platform as npm start runs it', () => {
  const ports = inject('platformPorts');

  it.each(SERVICES)('%s reports SERVING over grpc.health.v1, serves reflection and /metrics', async (name) => {
    const p = ports.services[name];
    expect(await check(p.grpc)).toBe('SERVING');
    const services = await listServices(p.grpc);
    expect(services).toContain('grpc.health.v1.Health');
    if (name === 'auth') expect(services).toContain('auth.v1.AuthService');
    const metrics = await (await fetch(`http://127.0.0.1:${p.metrics}/metrics`)).text();
    expect(metrics).toContain('process_resident_memory_bytes');
    expect(metrics).toContain(`service="${name}"`);
    expect((await fetch(`http://127.0.0.1:${p.metrics}/livez`)).status).toBe(200);
  });

  it('the gateway serves /metrics on its own port, never through the API', async () => {
    const metrics = await (await fetch(`http://127.0.0.1:${ports.gatewayMetrics}/metrics`)).text();
    expect(metrics).toContain('gateway_http_requests_total');
    expect((await fetch(`${inject('gatewayUrl')}/metrics`)).status).toBe(404);
  });

  it('a service stops in order on SIGTERM and comes back SERVING', async () => {
    await stopChild('analytics');
    const logs = (await childLogs('analytics')).join('\n');
    expect(logs).toContain('shutting down');
    expect(logs).toContain('shutdown complete');
    await expect(check(ports.services.analytics.grpc)).rejects.toThrow();
    await startChild('analytics');
    expect(await check(ports.services.analytics.grpc)).toBe('SERVING');
  });
});
