import { credentials, makeGenericClientConstructor, status, type ServiceDefinition, type ServiceError } from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { protoPath as healthProtoPath } from 'grpc-health-check';
import { describeGrpcError, NotFoundError } from '../../src/errors.js';
import { createGrpcClient } from '../../src/grpc/client.js';
import { bindService, createGrpcServer, type GrpcServerHandle } from '../../src/grpc/server.js';
import { createLogger, currentRequestContext } from '../../src/logger.js';
import { createMetrics } from '../../src/metrics.js';

// A hand-written JSON-serialised service: the kit must work with any generated definition.
const json = { serialize: (v: unknown) => Buffer.from(JSON.stringify(v)), deserialize: (b: Buffer) => JSON.parse(b.toString()) as unknown };
const echoDefinition = {
  echo: { path: '/test.v1.EchoService/Echo', requestStream: false, responseStream: false, requestSerialize: json.serialize, requestDeserialize: json.deserialize, responseSerialize: json.serialize, responseDeserialize: json.deserialize, originalName: 'echo' },
  find: { path: '/test.v1.EchoService/Find', requestStream: false, responseStream: false, requestSerialize: json.serialize, requestDeserialize: json.deserialize, responseSerialize: json.serialize, responseDeserialize: json.deserialize, originalName: 'find' },
  crash: { path: '/test.v1.EchoService/Crash', requestStream: false, responseStream: false, requestSerialize: json.serialize, requestDeserialize: json.deserialize, responseSerialize: json.serialize, responseDeserialize: json.deserialize, originalName: 'crash' },
} satisfies ServiceDefinition;
type Req = { text: string };
type Res = { text: string; requestId?: string };
interface EchoServer {
  echo: grpc.handleUnaryCall<Req, Res>;
  find: grpc.handleUnaryCall<Req, Res>;
  crash: grpc.handleUnaryCall<Req, Res>;
}
interface EchoClient extends grpc.Client {
  echo(r: Req, md: grpc.Metadata, o: Partial<grpc.CallOptions>, cb: (e: ServiceError | null, r: Res) => void): grpc.ClientUnaryCall;
  find(r: Req, md: grpc.Metadata, o: Partial<grpc.CallOptions>, cb: (e: ServiceError | null, r: Res) => void): grpc.ClientUnaryCall;
  crash(r: Req, md: grpc.Metadata, o: Partial<grpc.CallOptions>, cb: (e: ServiceError | null, r: Res) => void): grpc.ClientUnaryCall;
}
const EchoClientCtor = makeGenericClientConstructor(echoDefinition, 'test.v1.EchoService') as unknown as new (a: string, c: grpc.ChannelCredentials) => EchoClient;

const lines: string[] = [];
const logger = createLogger({ service: 'kit-test', level: 'debug', destination: new Writable({ write(chunk, _e, cb) { lines.push(String(chunk)); cb(); } }) });

const healthPkg = grpc.loadPackageDefinition(protoLoader.loadSync(healthProtoPath, { enums: String })) as unknown as {
  grpc: { health: { v1: { Health: new (a: string, c: grpc.ChannelCredentials) => grpc.Client & { check(r: { service: string }, cb: (e: ServiceError | null, r: { status: string }) => void): void } } } };
};
function checkHealth(port: number, service = ''): Promise<string> {
  const c = new healthPkg.grpc.health.v1.Health(`127.0.0.1:${port}`, credentials.createInsecure());
  return new Promise((resolve, reject) => c.check({ service }, (e, r) => { c.close(); if (e) reject(e); else resolve(r.status); }));
}

let server: GrpcServerHandle | undefined;
afterEach(async () => {
  await server?.shutdown(1_000);
  server = undefined;
});

async function startEcho(readyFlag: { ready: boolean }) {
  const metrics = createMetrics('kit-test');
  const binding = bindService<EchoServer>({
    name: 'echo',
    definition: echoDefinition,
    logger,
    metrics,
    handlers: {
      echo: async (req, ctx) => {
        ctx.log.info('echo called');
        return { text: req.text, requestId: ctx.requestId };
      },
      find: async (req) => { throw new NotFoundError(`no ${req.text}`); },
      crash: async () => { throw new Error('secret internals: mongodb://u:p@h'); },
    },
  });
  server = await createGrpcServer({
    services: [binding], port: 0, host: '127.0.0.1', logger,
    readiness: [async () => { if (!readyFlag.ready) throw new Error('mongo down'); }],
    healthIntervalMs: 50,
  });
  return { port: server.port, metrics };
}

describe('gRPC server and client', () => {
  it('reports NOT_SERVING until dependencies answer, then SERVING, then NOT_SERVING again when one is lost', async () => {
    const flag = { ready: false };
    const { port } = await startEcho(flag);
    await server!.refreshHealth();
    expect(await checkHealth(port)).toBe('NOT_SERVING');
    expect(await checkHealth(port, 'test.v1.EchoService')).toBe('NOT_SERVING');
    flag.ready = true;
    await server!.refreshHealth();
    expect(await checkHealth(port)).toBe('SERVING');
    expect(await checkHealth(port, 'test.v1.EchoService')).toBe('SERVING');
    flag.ready = false;
    await expect.poll(() => checkHealth(port), { timeout: 2_000 }).toBe('NOT_SERVING');
    server!.markNotServing();
    flag.ready = true;
    await new Promise((r) => setTimeout(r, 150));
    expect(await checkHealth(port)).toBe('NOT_SERVING');
  });

  it('carries the request id through metadata, maps domain errors and hides internals', async () => {
    const { port, metrics } = await startEcho({ ready: true });
    const client = createGrpcClient({ name: 'echo', address: `127.0.0.1:${port}`, ctor: EchoClientCtor, logger, metrics, deadlineMs: 2_000 });
    try {
      const { runWithRequestContext } = await import('../../src/logger.js');
      const res = await runWithRequestContext({ requestId: 'req-abc-123', log: logger }, () => client.call.echo({ text: 'hi' }));
      expect(res).toEqual({ text: 'hi', requestId: 'req-abc-123' });
      expect(currentRequestContext()).toBeUndefined();

      const notFound = await client.call.find({ text: 'x' }).catch((e: ServiceError) => e);
      expect(describeGrpcError(notFound as ServiceError)).toMatchObject({ grpcCode: status.NOT_FOUND, appCode: 'NOT_FOUND', message: 'no x' });

      const crash = await client.call.crash({ text: 'x' }).catch((e: ServiceError) => e);
      expect((crash as ServiceError).code).toBe(status.INTERNAL);
      expect((crash as ServiceError).details).toBe('internal error');
      expect(lines.some((l) => l.includes('req-abc-123'))).toBe(true);

      const text = await metrics.registry.metrics();
      expect(text).toMatch(/kit_test_rpc_requests_total\{method="test.v1.EchoService\/Find",code="NOT_FOUND",service="kit-test"\} 1/);
      expect(text).toMatch(/kit_test_rpc_requests_total\{method="test.v1.EchoService\/Echo",code="OK",service="kit-test"\} 1/);
    } finally {
      client.close();
    }
  });

  it('opens the breaker on unavailability but not on NOT_FOUND', async () => {
    const { port, metrics } = await startEcho({ ready: true });
    const client = createGrpcClient({ name: 'echo', address: `127.0.0.1:${port}`, ctor: EchoClientCtor, logger, metrics, deadlineMs: 500, breaker: { volumeThreshold: 3, resetTimeoutMs: 60_000 } });
    try {
      for (let i = 0; i < 6; i++) await client.call.find({ text: 'x' }).catch(() => undefined);
      expect(client.breaker.opened).toBe(false);
      await server!.shutdown(500);
      server = undefined;
      for (let i = 0; i < 10; i++) await client.call.echo({ text: 'x' }).catch(() => undefined);
      expect(client.breaker.opened).toBe(true);
      const err = await client.call.echo({ text: 'x' }).catch((e: ServiceError) => e);
      expect((err as ServiceError).code).toBe(status.UNAVAILABLE);
      expect(await metrics.registry.getSingleMetricAsString('kit_test_breaker_state')).toMatch(/upstream="echo".* 2/);
    } finally {
      client.close();
    }
  });

  it('honours deadlines', async () => {
    const metrics = createMetrics('kit-test');
    const slow = bindService<EchoServer>({
      name: 'echo', definition: echoDefinition, logger,
      handlers: { echo: () => new Promise((r) => setTimeout(() => r({ text: 'late' }), 1_000)), find: async () => ({ text: '' }), crash: async () => ({ text: '' }) },
    });
    server = await createGrpcServer({ services: [slow], port: 0, host: '127.0.0.1', logger, readiness: [] });
    const client = createGrpcClient({ name: 'echo', address: `127.0.0.1:${server.port}`, ctor: EchoClientCtor, logger, metrics });
    try {
      const err = await client.call.echo({ text: 'x' }, { deadlineMs: 100 }).catch((e: ServiceError) => e);
      expect((err as ServiceError).code).toBe(status.DEADLINE_EXCEEDED);
    } finally {
      client.close();
    }
  });
});
