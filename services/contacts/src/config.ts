import { baseServiceConfigSpec, int, loadConfig, type Env } from '@mailfleet/kit';

/** The contacts service's configuration: the common fields plus the book purge and event dedup settings. */
export function contactsConfigSpec() {
  return {
    ...baseServiceConfigSpec('contacts'),
    /** How often the sweeper looks for contact book deletions to finish (including ones a crash interrupted). */
    bookPurgeIntervalMs: int('BOOK_PURGE_INTERVAL_MS', 10_000, 100),
    /** How long a deleted book's (invisible) document is kept so a racing contact create is purged too. */
    bookPurgeGraceMs: int('BOOK_PURGE_GRACE_MS', 60_000, 0),
    /** Contacts deleted per batch while purging a book. */
    bookPurgeBatchSize: int('BOOK_PURGE_BATCH_SIZE', 500, 1, 5_000),
    /** How long handled event ids are remembered (the stream keeps events 7 days). */
    processedEventRetentionMs: int('PROCESSED_EVENT_RETENTION_MS', 8 * 24 * 3600_000, 60_000),
  };
}

export function loadContactsConfig(env: Env) {
  return loadConfig(contactsConfigSpec(), env);
}
export type ContactsConfig = ReturnType<typeof loadContactsConfig>;
