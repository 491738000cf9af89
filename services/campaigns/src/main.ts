import { ConfigError, startService } from '@mailfleet/kit';
import { PROTO_ROOT } from '@mailfleet/proto';
import { loadCampaignsConfig } from './config.js';
import { createCampaignsServer } from './server.js';

// Composition root: the only place that reads process.env and opens connections.
try {
  const config = loadCampaignsConfig(process.env);
  await startService({
    name: 'campaigns',
    config,
    env: process.env,
    handleSignals: true,
    reflection: { protoRoot: PROTO_ROOT, files: ['campaigns/v1/campaigns.proto'] },
    build: (infra) => createCampaignsServer({ config, infra }),
  });
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`campaigns: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`campaigns: failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
