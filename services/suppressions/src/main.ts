import { ConfigError, startService } from '@mailfleet/kit';
import { PROTO_ROOT } from '@mailfleet/proto';
import { loadSuppressionsConfig } from './config.js';
import { createSuppressionsServer } from './server.js';

// Composition root: the only place that reads process.env and opens connections.
try {
  const config = loadSuppressionsConfig(process.env);
  await startService({
    name: 'suppressions',
    config,
    env: process.env,
    handleSignals: true,
    reflection: { protoRoot: PROTO_ROOT, files: ['suppressions/v1/suppressions.proto'] },
    build: (infra) => createSuppressionsServer({ config, infra }),
  });
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`suppressions: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`suppressions: failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
