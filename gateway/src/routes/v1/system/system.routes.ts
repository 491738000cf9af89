import type { FastifyInstance } from 'fastify';

export interface SystemInfo {
  readonly version: string;
  readonly environment: string;
  readonly startedAt: number;
  /** True once shutdown began: health answers 503 so load balancers stop routing here. */
  readonly draining?: () => boolean;
}

const healthSchema = {
  tags: ['System'],
  summary: 'Liveness of the gateway',
  security: [],
  response: {
    200: {
      type: 'object',
      required: ['status', 'uptime', 'timestamp'],
      properties: { status: { type: 'string' }, uptime: { type: 'number' }, timestamp: { type: 'number', description: 'epoch milliseconds' } },
    },
    503: {
      type: 'object',
      description: 'the gateway is shutting down',
      required: ['status', 'uptime', 'timestamp'],
      properties: { status: { type: 'string', const: 'draining' }, uptime: { type: 'number' }, timestamp: { type: 'number' } },
    },
  },
} as const;

const versionSchema = {
  tags: ['System'],
  summary: 'Running version and environment',
  security: [],
  response: {
    200: {
      type: 'object',
      required: ['version', 'environment', 'nodeVersion', 'platform', 'arch', 'timestamp', 'versions', 'memory'],
      properties: {
        version: { type: 'string' },
        environment: { type: 'string' },
        nodeVersion: { type: 'string' },
        platform: { type: 'string' },
        arch: { type: 'string' },
        timestamp: { type: 'string', format: 'date-time' },
        versions: { type: 'object', required: ['node', 'v8'], properties: { node: { type: 'string' }, v8: { type: 'string' } } },
        memory: {
          type: 'object', required: ['rss', 'heapTotal', 'heapUsed', 'external'],
          properties: { rss: { type: 'number' }, heapTotal: { type: 'number' }, heapUsed: { type: 'number' }, external: { type: 'number' } },
        },
      },
    },
  },
} as const;

/** SPEC 4.12: no authentication. */
export async function systemRoutes(app: FastifyInstance, opts: { info: SystemInfo }): Promise<void> {
  app.get('/health', { schema: healthSchema, config: { public: true } }, async (_req, reply) => {
    const draining = opts.info.draining?.() ?? false;
    return reply.code(draining ? 503 : 200).send({ status: draining ? 'draining' : 'ok', uptime: process.uptime(), timestamp: Date.now() });
  });

  app.get('/version', { schema: versionSchema, config: { public: true } }, async () => {
    const m = process.memoryUsage();
    return {
      version: opts.info.version,
      environment: opts.info.environment,
      nodeVersion: process.version,
      platform: process.platform,
      arch: process.arch,
      timestamp: new Date().toISOString(),
      versions: { node: process.versions.node, v8: process.versions.v8 },
      memory: { rss: m.rss, heapTotal: m.heapTotal, heapUsed: m.heapUsed, external: m.external },
    };
  });
}
