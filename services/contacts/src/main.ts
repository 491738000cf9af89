import { ConfigError, startService } from '@mailfleet/kit';
import { PROTO_ROOT } from '@mailfleet/proto';
import { loadContactsConfig } from './config.js';
import { createContactsServer } from './server.js';

// Composition root: the only place that reads process.env and opens connections.
try {
  const config = loadContactsConfig(process.env);
  await startService({
    name: 'contacts',
    config,
    env: process.env,
    handleSignals: true,
    reflection: { protoRoot: PROTO_ROOT, files: ['contacts/v1/contacts.proto'] },
    build: (infra) => createContactsServer({ config, infra }),
  });
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`contacts: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`contacts: failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
