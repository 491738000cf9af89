import { ConfigError, startService } from '@mailfleet/kit';
import { PROTO_ROOT } from '@mailfleet/proto';
import { loadDomainsConfig } from './config.js';
import { createDomainsServer } from './server.js';

// Composition root: the only place that reads process.env and opens connections.
try {
  const config = loadDomainsConfig(process.env);
  await startService({
    name: 'domains',
    config,
    env: process.env,
    handleSignals: true,
    reflection: { protoRoot: PROTO_ROOT, files: ['domains/v1/domains.proto'] },
    build: (infra) => createDomainsServer({ config, infra }),
  });
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`domains: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`domains: failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
