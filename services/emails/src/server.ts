import { bindService, createOutboxRelay, type ServiceInfra, type ServiceParts } from '@mailfleet/kit';
import { emailsV1 } from '@mailfleet/proto';
import { createIdentityCache } from './clients/identity-cache.js';
import { createSmtpRelay, type SmtpRelay } from './clients/smtp.js';
import { createUpstreams, type Upstreams } from './clients/upstreams.js';
import type { EmailsConfig } from './config.js';
import type { RecipientRefusal } from './domain/delivery.js';
import type { BounceDetails } from './domain/event-data.js';
import { deriveKey } from './domain/tracking.js';
import { createDomainDeletedConsumer, createIdentityInvalidator } from './events/domain-events.consumer.js';
import { createOutboxPublisher } from './events/outbox-publisher.js';
import { startInboundSmtpServer } from './inbound/inbound-server.js';
import { createSuppressionBatcher } from './clients/suppression-batcher.js';
import { createReportHandler } from './inbound/report-handler.js';
import { classifyBounce } from './inbound/reports.js';
import { createEmailsRepository, type EmailsRepositoryHooks } from './repositories/emails.repository.js';
import { createIdempotencyRepository } from './repositories/idempotency.repository.js';
import { createSendQueueRepository } from './repositories/send-queue.repository.js';
import { createTemplatesRepository } from './repositories/templates.repository.js';
import { createEmailsHandlers } from './rpc/emails.rpc.js';
import { createAcceptor } from './sending/accept.js';
import { createSendWorker } from './sending/send-worker.js';

export interface EmailsServerOverrides {
  /** Other services; default gRPC clients from the config. */
  readonly upstreams?: Upstreams;
  readonly relay?: SmtpRelay;
  /** false: the send worker never starts (tests: a process that accepts and dies before sending). */
  readonly startSendWorker?: boolean;
}

/** A relay's 5xx to one recipient, classified like the same refusal in a DSN. */
export function classifyRefusal(r: RecipientRefusal): BounceDetails {
  const enhanced = /\b([245])\.(\d{1,3})\.(\d{1,3})\b/.exec(r.response)?.[0];
  const status = enhanced ?? `${String(r.responseCode).charAt(0) || '5'}.0.0`;
  return classifyBounce({ recipient: r.recipient, action: 'failed', status, diagnostic: r.response });
}

/**
 * Binds the emails service: repositories (indexes at start), the accept path,
 * the send workers, the inbound report listener, the domain event consumers
 * and the idempotency sweeper.
 */
/** Outbox entries younger than this are left to the publisher by the relay's safety-net pass. */
const OUTBOX_SAFETY_NET_MIN_AGE_MS = 120_000;

export async function createEmailsServer(deps: { config: EmailsConfig; infra: ServiceInfra; overrides?: EmailsServerOverrides }): Promise<ServiceParts> {
  const { config, infra } = deps;
  const { logger } = infra;
  const { db } = infra.mongo;
  const repoHooks: EmailsRepositoryHooks = {};
  const emails = createEmailsRepository(db, repoHooks);
  const templates = createTemplatesRepository(db);
  const idempotency = createIdempotencyRepository(db);
  const queue = createSendQueueRepository(db);
  await Promise.all([emails.ensureIndexes(), templates.ensureIndexes(), idempotency.ensureIndexes(), queue.ensureIndexes()]);

  const upstreams = deps.overrides?.upstreams ?? createUpstreams({
    authAddr: config.authAddr, domainsAddr: config.domainsAddr, suppressionsAddr: config.suppressionsAddr,
    deadlineMs: config.upstreamDeadlineMs, logger, metrics: infra.metrics,
  });
  const identities = createIdentityCache(upstreams.identities, { ttlMs: config.identityCacheTtlMs });
  const suppressions = createSuppressionBatcher(upstreams.suppressions);
  const relay = deps.overrides?.relay ?? createSmtpRelay({ url: config.smtpUrl, poolSize: config.smtpPoolSize, timeoutMs: config.smtpTimeoutMs, logger });
  const trackingKey = deriveKey(config.trackingSigningKey, 'tracking');
  const verpSecret = deriveKey(config.trackingSigningKey, 'verp');

  // Events of this process's writes go out at once through the publisher (reads by id); the relay's pass over
  // the whole collection (a scan on FerretDB) is only the safety net, so this service runs its own relay at a
  // slow interval instead of handing the collection to the kit's every-second one. Small batches: FerretDB v1
  // keeps a SQLite connection per statement of a bulk command until it ends (pool of 100).
  const publisher = createOutboxPublisher({
    collection: emails.collection, nats: infra.nats, logger: logger.child({ component: 'outbox' }), metrics: infra.metrics,
    // The record this process remembers of the email (see RecentEmails) follows, so its next write starts from the stored outbox.
    onRemoved: (id, entryIds) => emails.outboxRemoved(id, entryIds),
  });
  repoHooks.onEvents = (ids) => publisher.hint(ids);
  repoHooks.onWritten = (id, outbox) => publisher.hintWritten(id, outbox);
  repoHooks.isPublished = (eventId) => publisher.isPublished(eventId);
  repoHooks.onDropped = (id, entryIds) => publisher.dropped(id, entryIds);
  const outbox = createOutboxRelay({
    nats: infra.nats, collections: [emails.collection], logger: logger.child({ component: 'outbox' }),
    metrics: infra.metrics, batchSize: 500, concurrency: 8, intervalMs: config.outboxScanIntervalMs,
    // Fresh entries are the publisher's: published at once, removed with the email's next write or after
    // 30 s. Under a burst (a 10,000-mail campaign accepted in a few minutes) the removals, each a rewrite of
    // the email, queue up behind the collection's writes for a minute or more; at 30 s the safety net
    // re-scanned the whole collection in batches of 25 for entries already out (84 scans of 1.6 s). Events
    // a process left when it died go out at its restart (the first pass takes everything) or, from another
    // replica, within this age plus OUTBOX_SCAN_INTERVAL_MS, 500 per pass. Still, in a 10,000-mail campaign
    // with a 2 min age, passes that went on batch after batch of 25 scanned the collection 301 times (2.9 s
    // each, the largest item of the profile): an aged pass now takes one batch.
    minAgeMs: OUTBOX_SAFETY_NET_MIN_AGE_MS,
  });

  const worker = createSendWorker({
    emails, queue, identities, suppressions, relay, logger: logger.child({ component: 'send-worker' }),
    classify: classifyRefusal,
    concurrency: config.sendConcurrency, batchSize: config.sendBatchSize, outcomeLingerMs: config.sendOutcomeLingerMs, pollMs: config.sendPollMs, busyPollMs: config.sendBusyPollMs, handoffMax: config.sendHandoffMax, leaseMs: config.sendLeaseMs, minLeaseLeftMs: 2 * config.smtpTimeoutMs, maxAttempts: config.sendMaxAttempts,
    retryBaseMs: config.retryBaseMs, retryMaxMs: config.retryMaxMs, verpSecret, bounceDomain: config.bounceDomain,
    tracking: { publicUrl: config.publicUrl, key: trackingKey },
  });

  const accept = createAcceptor({
    emails, queue, templates, idempotency, identities, suppressions, quota: upstreams.quota,
    maxAttachmentsBytes: config.maxAttachmentsBytes, idempotencyTtlMs: config.idempotencyTtlMs, idempotencyTakeoverMs: config.idempotencyTakeoverMs,
    logger, onQueued: () => worker.wake(), lingerMs: config.acceptLingerMs, handoff: worker.handoff,
  });

  const handlers = createEmailsHandlers({
    emails, queue, templates, accept, trackingKey, logger, onDue: () => worker.wake(), handoff: worker.handoff,
  });

  const inbound = await startInboundSmtpServer({
    port: config.inboundSmtpPort, host: config.inboundSmtpHost, bounceDomain: config.bounceDomain, secret: verpSecret,
    logger: logger.child({ component: 'inbound-smtp' }),
    onReport: createReportHandler({ emails, queue, classify: classifyBounce, logger, lingerMs: config.reportLingerMs }),
  });
  logger.info({ port: inbound.port, bounceDomain: config.bounceDomain }, 'inbound SMTP listener for delivery reports started');

  const sweeper = setInterval(() => {
    idempotency.sweep().catch((err: unknown) => logger.warn({ err }, 'idempotency sweep failed'));
  }, config.sweepIntervalMs);
  sweeper.unref();

  if (deps.overrides?.startSendWorker !== false) worker.start();
  publisher.start();
  outbox.start();

  return {
    services: [bindService<emailsV1.EmailsServiceServer>({
      name: 'emails', definition: emailsV1.EmailsServiceService, handlers, logger, metrics: infra.metrics,
    })],
    // Published by the relay above, not the kit's (see there).
    outboxCollections: [],
    consumers: [
      createIdentityInvalidator({ nats: infra.nats, cache: identities, logger }),
      createDomainDeletedConsumer({ nats: infra.nats, emails, queue, cache: identities, logger, metrics: infra.metrics, handoff: worker.handoff }),
    ],
    workers: [
      // In-flight sends finish and are recorded before anything else closes.
      { name: 'send workers', stop: () => worker.stop() },
      { name: 'inbound SMTP listener', stop: () => inbound.close() },
      {
        name: 'emails outbox',
        stop: async () => {
          await publisher.stop();
          await outbox.stop();
          // Last pass: events of the sends just finished go out now (any left are published at the next start).
          await outbox.drainOnce().catch((err: unknown) => logger.warn({ err }, 'final outbox pass failed; events stay in the outbox'));
        },
      },
      {
        name: 'sweeper and clients',
        stop: async () => {
          clearInterval(sweeper);
          relay.close();
          if (!deps.overrides?.upstreams) await upstreams.close();
        },
      },
    ],
  };
}
