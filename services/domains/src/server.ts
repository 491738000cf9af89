import { bindService, type ServiceInfra, type ServiceParts } from '@mailfleet/kit';
import { domainsV1 } from '@mailfleet/proto';
import { createDnsClient, type DnsClient } from './clients/dns.client.js';
import { createLocalDnsPublisher, noRecordPublisher } from './clients/local-dns.client.js';
import type { DomainsConfig } from './config.js';
import { createKeySealer } from './domain/dkim-keys.js';
import type { VerificationTimings } from './domain/verification.js';
import { createDomainsRepository } from './repositories/domains.repository.js';
import { createDomainsHandlers } from './rpc/domains.rpc.js';
import { createVerificationWorker } from './workers/verification.worker.js';

export function timingsOf(config: DomainsConfig): VerificationTimings {
  return {
    retryAttempts: config.verifyRetryAttempts,
    retryBaseMs: config.verifyRetryBaseMs,
    retryMaxMs: config.verifyRetryMaxMs,
    tempRetryBaseMs: config.verifyTempRetryBaseMs,
    tempRetryMaxMs: config.verifyTempRetryMaxMs,
    tempFailureMaxMs: config.verifyTempFailureMaxMs,
    recheckIntervalMs: config.verifyRecheckIntervalMs,
  };
}

/**
 * Binds the domains service: the repository (indexes created at start), the
 * RPC handlers, and the verification worker that checks due domains' DNS
 * records in the background. `dns` replaces the resolver in tests.
 */
export async function createDomainsServer(deps: { config: DomainsConfig; infra: ServiceInfra; dns?: DnsClient }): Promise<ServiceParts> {
  const { config, infra } = deps;
  const repo = createDomainsRepository(infra.mongo.db);
  await repo.ensureIndexes();
  const sealer = createKeySealer(config.dkimMasterKey);
  const dns = deps.dns ?? await createDnsClient({ servers: config.dnsServers, timeoutMs: config.dnsTimeoutMs, tries: config.dnsTries, logger: infra.logger });

  let kickRelay: () => void = () => undefined;
  const worker = createVerificationWorker({
    repo,
    dns,
    timings: timingsOf(config),
    pollIntervalMs: config.verifyPollIntervalMs,
    leaseMs: config.verifyClaimLeaseMs,
    concurrency: config.verifyConcurrency,
    logger: infra.logger.child({ worker: 'verification' }),
    onEvents: () => kickRelay(),
  });

  const handlers = createDomainsHandlers({
    repo,
    sealer,
    records: { spfInclude: config.spfInclude, mailFromSubdomain: config.mailFromSubdomain, mxHost: config.mxHost },
    selectorPrefix: config.dkimSelectorPrefix,
    publisher: config.localDnsControlUrl
      ? createLocalDnsPublisher({ controlUrl: config.localDnsControlUrl, logger: infra.logger })
      : noRecordPublisher,
    kickWorker: () => worker.kick(),
    kickRelay: () => kickRelay(),
    logger: infra.logger,
  });
  if (config.localDnsControlUrl) infra.logger.info({ controlUrl: config.localDnsControlUrl }, 'local mode: domain records are published to the local DNS server');
  worker.start();

  return {
    services: [bindService<domainsV1.DomainsServiceServer>({
      name: 'domains', definition: domainsV1.DomainsServiceService, handlers, logger: infra.logger, metrics: infra.metrics,
    })],
    outboxCollections: [repo.collection],
    onRelay: (relay) => {
      kickRelay = () => relay.kick();
    },
    workers: [{ name: 'verification worker', stop: () => worker.stop() }],
  };
}
