import { ConfigError, startService } from '@mailfleet/kit';
import { PROTO_ROOT } from '@mailfleet/proto';
import { loadAuthConfig } from './config.js';
import { createAuthServer } from './server.js';

// Composition root: the only place that reads process.env and opens connections.
try {
  const config = loadAuthConfig(process.env);
  await startService({
    name: 'auth',
    config,
    env: process.env,
    handleSignals: true,
    reflection: { protoRoot: PROTO_ROOT, files: ['auth/v1/auth.proto'] },
    build: (infra) => createAuthServer({ config, infra }),
  });
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`auth: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`auth: failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
