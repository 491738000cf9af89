import { ConfigError, startService } from '@mailfleet/kit';
import { PROTO_ROOT } from '@mailfleet/proto';
import { loadWebhooksConfig } from './config.js';
import { createWebhooksServer } from './server.js';

// Composition root: the only place that reads process.env and opens connections.
try {
  const config = loadWebhooksConfig(process.env);
  await startService({
    name: 'webhooks',
    config,
    env: process.env,
    handleSignals: true,
    reflection: { protoRoot: PROTO_ROOT, files: ['webhooks/v1/webhooks.proto'] },
    build: (infra) => createWebhooksServer({ config, infra }),
  });
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`webhooks: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`webhooks: failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
