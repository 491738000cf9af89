import { ConfigError, startService } from '@mailfleet/kit';
import { PROTO_ROOT } from '@mailfleet/proto';
import { loadEmailsConfig } from './config.js';
import { createEmailsServer } from './server.js';

// Composition root: the only place that reads process.env and opens connections.
try {
  const config = loadEmailsConfig(process.env);
  await startService({
    name: 'emails',
    config,
    env: process.env,
    handleSignals: true,
    reflection: { protoRoot: PROTO_ROOT, files: ['emails/v1/emails.proto'] },
    build: (infra) => createEmailsServer({ config, infra }),
  });
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`emails: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`emails: failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
