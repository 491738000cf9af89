import { ConfigError, startService } from '@mailfleet/kit';
import { PROTO_ROOT } from '@mailfleet/proto';
import { loadAnalyticsConfig } from './config.js';
import { createAnalyticsServer } from './server.js';

// Composition root: the only place that reads process.env and opens connections.
try {
  const config = loadAnalyticsConfig(process.env);
  await startService({
    name: 'analytics',
    config,
    env: process.env,
    handleSignals: true,
    reflection: { protoRoot: PROTO_ROOT, files: ['analytics/v1/analytics.proto'] },
    build: (infra) => createAnalyticsServer({ config, infra }),
  });
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`analytics: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`analytics: failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
