import { address, baseServiceConfigSpec, int, loadConfig, secret, str, url, type Env } from '@mailfleet/kit';

/** The campaigns service's configuration: the common fields plus upstreams, links, scheduling and the batch sender. */
export function campaignsConfigSpec() {
  return {
    ...baseServiceConfigSpec('campaigns'),
    contactsAddr: address('CONTACTS_GRPC_ADDR', '127.0.0.1:50053'),
    domainsAddr: address('DOMAINS_GRPC_ADDR', '127.0.0.1:50052'),
    emailsAddr: address('EMAILS_GRPC_ADDR', '127.0.0.1:50054'),
    /** Asked which contacts are suppressed when a campaign's total is counted. */
    suppressionsAddr: address('SUPPRESSIONS_GRPC_ADDR', '127.0.0.1:50056'),
    /** Deadline of every call to another service. */
    upstreamDeadlineMs: int('UPSTREAM_DEADLINE_MS', 10_000, 100),
    /** Deadline of one SendBatch call (up to 100 emails rendered and queued by the emails service). */
    sendBatchDeadlineMs: int('CAMPAIGN_SEND_BATCH_DEADLINE_MS', 30_000, 100),
    /** After a failed batch (an upstream error), how long before any replica tries it again. */
    batchRetryDelayMs: int('CAMPAIGN_BATCH_RETRY_DELAY_MS', 5_000, 10),
    /** Base of the public unsubscribe links (the gateway's public address). */
    publicUrl: url('PUBLIC_URL', ['http', 'https'], 'http://127.0.0.1:8080'),
    /** Signs the unsubscribe tokens. Secret. */
    trackingSigningKey: secret('TRACKING_SIGNING_KEY', 16),
    /** IANA time zone natural-language schedules ("tomorrow at 9am") are read in. */
    scheduleTimeZone: str('CAMPAIGN_TIME_ZONE', 'UTC'),
    /** How often the batch sender looks for due batches and scheduled campaigns. */
    senderPollMs: int('CAMPAIGN_SENDER_POLL_MS', 2_000, 50),
    /** How long a claimed batch belongs to one replica before another may take it over (renewed per chunk). */
    batchLeaseMs: int('CAMPAIGN_BATCH_LEASE_MS', 120_000, 1_000),
    /** SendBatch calls of one batch in flight at once (the cursor still moves over chunks strictly in order). */
    chunksInFlight: int('CAMPAIGN_CHUNKS_IN_FLIGHT', 8, 1, 64),
    /** Milliseconds in one "minute" of batchWindowMinutes: 60000 in production; tests shorten it. */
    batchWindowUnitMs: int('CAMPAIGN_BATCH_WINDOW_UNIT_MS', 60_000, 1),
    /** How long handled event ids are remembered (the stream keeps events 7 days). */
    processedEventRetentionMs: int('PROCESSED_EVENT_RETENTION_MS', 8 * 24 * 3600_000, 60_000),
  };
}

export function loadCampaignsConfig(env: Env) {
  return loadConfig(campaignsConfigSpec(), env);
}
export type CampaignsConfig = ReturnType<typeof loadCampaignsConfig>;
