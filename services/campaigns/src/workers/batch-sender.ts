import { status as grpcStatus } from '@grpc/grpc-js';
import { describeGrpcError, isServiceError, randomBase62, type Logger } from '@mailfleet/kit';
import type { emailsV1 } from '@mailfleet/proto';
import type { Campaign } from '../domain/campaign.js';
import { renderCampaignText } from '../domain/render.js';
import { createUnsubscribeToken, unsubscribeUrl } from '../domain/unsubscribe-token.js';
import type { BookContact, CampaignUpstreams, ContactsPage } from '../clients/upstreams.js';
import type { CampaignsRepository, SendingState } from '../repositories/campaigns.repository.js';

/** Emails per SendBatch call (the emails service's batch limit). */
export const CHUNK_SIZE = 100;
const COUNT_PAGE = 5000;
/** Contacts read ahead per page of the book (the contacts service's limit): one read serves fifty chunks. */
const READ_AHEAD = 5000;
/** Contacts read longer ago than this are read again: an unsubscribe meanwhile is honoured. */
const READ_AHEAD_MAX_AGE_MS = 30_000;
const MAX_READ_AHEAD_CAMPAIGNS = 64;
/**
 * Chunks of one batch handed to the emails service at once. Each SendBatch is several sequential
 * storage round trips on the emails side (idempotency claim, checks, inserts, completion), so one
 * chunk at a time leaves both services mostly waiting; the emails service groups concurrent
 * accepts' inserts into shared writes.
 */
export const DEFAULT_CHUNKS_IN_FLIGHT = 8;
/** Pauses before a transiently failed chunk is tried again in place, before the whole batch backs off. */
const CHUNK_RETRY_DELAYS_MS = [250, 1_000];
/** Longest pause between retries of a transiently failing batch (the delay doubles per failure up to this). */
const MAX_RETRY_DELAY_MS = 5 * 60_000;

/**
 * Upstream refusals that the same call will get again however often it is retried (a bad address,
 * a domain no longer verified, a contact book deleted): the campaign is paused with the reason
 * rather than retried forever. Anything else (UNAVAILABLE, DEADLINE_EXCEEDED, a database error...)
 * is retried with backoff.
 */
const PERMANENT = new Set<number>([
  grpcStatus.INVALID_ARGUMENT, grpcStatus.FAILED_PRECONDITION, grpcStatus.NOT_FOUND, grpcStatus.PERMISSION_DENIED,
]);

/** The reason a campaign is paused with, when `err` is a permanent refusal; undefined for a transient failure. */
export function permanentFailureReason(err: unknown): string | undefined {
  if (!isServiceError(err) || !PERMANENT.has(err.code)) return undefined;
  return (err.details || err.message).slice(0, 1000);
}

/**
 * The chunk item whose own recipient the emails service refused (INVALID_ARGUMENT naming `emails[i]`
 * and the field `to`): that contact's address, not the campaign, is the problem, so the contact is
 * left out and the rest of the chunk goes on. Undefined for any other error.
 */
export function refusedRecipientIndex(err: unknown): number | undefined {
  if (!isServiceError(err) || err.code !== grpcStatus.INVALID_ARGUMENT) return undefined;
  const { details } = describeGrpcError(err);
  return details && details.field === 'to' && typeof details.index === 'number' ? details.index : undefined;
}

/** Delay before the next attempt after `failures` failures in a row (1: the configured delay, then doubling). */
export function retryDelay(baseMs: number, failures: number): number {
  return Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.min(Math.max(failures - 1, 0), 16));
}

export interface BatchSender {
  start(): void;
  /** One pass: start due scheduled campaigns, then send every due batch. Resolves when done (tests, shutdown). */
  tick(): Promise<void>;
  stop(): Promise<void>;
}

export interface BatchSenderDeps {
  readonly campaigns: CampaignsRepository;
  readonly upstreams: Pick<CampaignUpstreams, 'bookContacts' | 'sendBatch' | 'countSuppressed'>;
  readonly logger: Logger;
  readonly publicUrl: string;
  readonly signingKey: string;
  readonly pollMs: number;
  readonly leaseMs: number;
  /** After a failed batch: how long before it is tried again (the same idempotency keys make the retry safe). */
  readonly retryDelayMs: number;
  /** SendBatch calls of one batch in flight at once (DEFAULT_CHUNKS_IN_FLIGHT). */
  readonly chunksInFlight?: number;
  /** Milliseconds per batchWindowMinutes unit (60,000; shorter in tests). */
  readonly windowUnitMs: number;
  readonly now?: () => Date;
}

/** The idempotency key of one SendBatch call: a retry after a crash replays instead of sending again. */
export function chunkIdempotencyKey(campaignId: string, batchNo: number, chunkNo: number): string {
  return `campaign:${campaignId}:batch:${batchNo}:chunk:${chunkNo}`;
}

/**
 * The batch sender every replica runs. A due batch is claimed with one
 * atomic update (a lease on the campaign document), so two replicas never
 * send the same batch; the lease expires if its holder dies, and the next
 * holder continues from the stored cursor. Within a batch the contacts go out
 * in chunks of 100; after each chunk the cursor moves (one atomic update), and
 * each SendBatch carries an idempotency key per (campaign, batch, chunk), so
 * a crash between the call and the cursor update replays the call instead of
 * sending twice. A pause is seen between chunks: the rest of the batch is
 * not handed over, and a resume continues from the cursor.
 */
export function createBatchSender(deps: BatchSenderDeps): BatchSender {
  const now = deps.now ?? (() => new Date());
  const owner = `sender-${randomBase62(12)}`;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;

  /** Per campaign: contacts read from the book after `from`, not yet sent. */
  const ahead = new Map<string, { from: string | null; contacts: readonly BookContact[]; next: string | undefined; at: number }>();

  /**
   * The next `want` subscribed contacts after `cursor`, and the cursor after them (undefined at the end
   * of the book). Served from what was read ahead when that starts at `cursor` (a replica that took
   * the campaign over, or a resume, reads afresh); each chunk's cursor is its last contact's, so a
   * crash after any chunk resumes exactly after it.
   */
  async function nextChunk(c: Campaign, cursor: string | null, want: number, readUpTo: number): Promise<ContactsPage> {
    let buf = ahead.get(c.id);
    if (!buf || buf.from !== cursor || Date.now() - buf.at > READ_AHEAD_MAX_AGE_MS || (buf.contacts.length < want && buf.next)) {
      const page = await deps.upstreams.bookContacts(c.teamId, c.contactBookId ?? '', cursor, Math.max(want, Math.min(readUpTo, READ_AHEAD)));
      buf = { from: cursor, contacts: page.contacts, next: page.nextCursor, at: Date.now() };
    }
    const contacts = buf.contacts.slice(0, want);
    const rest = buf.contacts.slice(want);
    const last = contacts[contacts.length - 1];
    const next = rest.length > 0 && last ? last.cursor : buf.next;
    ahead.delete(c.id);
    if (rest.length > 0 && next !== undefined) {
      ahead.set(c.id, { ...buf, from: next, contacts: rest });
      // Campaigns paused or deleted mid-page leave theirs behind: keep the newest few.
      if (ahead.size > MAX_READ_AHEAD_CAMPAIGNS) ahead.delete(ahead.keys().next().value as string);
    }
    return { contacts, nextCursor: next };
  }

  /**
   * The book's sendable contacts, counted page by page. When the batch starts at the book's beginning (a
   * campaign's first batch), the first page is kept as its read-ahead: the same read serves the count and the
   * first chunks, one scan of the book less on FerretDB.
   */
  async function countTotal(c: Campaign, batchCursor: string | null): Promise<number> {
    let total = 0;
    let cursor: string | null = null;
    for (;;) {
      const page = await deps.upstreams.bookContacts(c.teamId, c.contactBookId ?? '', cursor, COUNT_PAGE);
      if (cursor === null && batchCursor === null) {
        ahead.set(c.id, { from: null, contacts: page.contacts, next: page.nextCursor, at: Date.now() });
        if (ahead.size > MAX_READ_AHEAD_CAMPAIGNS) ahead.delete(ahead.keys().next().value as string);
      }
      // Subscribed and not suppressed: the emails service refuses suppressed addresses (email.suppressed).
      total += page.contacts.length - (await deps.upstreams.countSuppressed(c.teamId, page.contacts.map((x) => x.email)));
      if (!page.nextCursor) return total;
      cursor = page.nextCursor;
    }
  }

  function render(c: Campaign, contact: { id: string; email: string; firstName?: string | undefined; lastName?: string | undefined; properties: Readonly<Record<string, string>> }): emailsV1.OutgoingEmail {
    const url = unsubscribeUrl(deps.publicUrl, createUnsubscribeToken(deps.signingKey, { teamId: c.teamId, campaignId: c.id, contactId: contact.id }));
    const html = c.html ? renderCampaignText(c.html, contact, url, true) : undefined;
    const text = c.content ? renderCampaignText(c.content, contact, url, false) : undefined;
    return {
      to: [contact.email],
      from: c.from,
      subject: renderCampaignText(c.subject, contact, url, false),
      html,
      text,
      templateId: undefined,
      variables: undefined,
      replyTo: [...c.replyTo],
      cc: [...c.cc],
      bcc: [...c.bcc],
      headers: { 'List-Unsubscribe': `<${url}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
      attachments: [],
      scheduledAt: undefined,
      inReplyToId: undefined,
      campaignId: c.id,
      contactId: contact.id,
      metadata: undefined,
    };
  }

  /**
   * Hands one chunk to the emails service under its key. A chunk refused for one item's own recipient
   * wrote nothing and released its key, so the rest goes again under the same key at once; a retry
   * after a crash leaves out the same contacts and replays.
   */
  async function sendChunk(c: Campaign, contacts: readonly BookContact[], key: string, log: Logger): Promise<void> {
    let emails = contacts.map((ct) => render(c, ct));
    let retries = 0;
    while (emails.length > 0) {
      try {
        await deps.upstreams.sendBatch({
          teamId: c.teamId,
          emails,
          idempotencyKey: key,
          bodyHash: undefined,
          restrictDomainId: undefined,
          apiKeyId: undefined,
        });
        return;
      } catch (err) {
        const bad = refusedRecipientIndex(err);
        const skipped = bad === undefined ? undefined : emails[bad];
        if (!skipped) {
          // A transient failure is first tried again here, with the same emails under the same key: the chunks
          // after this one that were accepted meanwhile then keep their place, instead of all being read and
          // asked again after the batch's backoff (see README: a replay needs the same contacts).
          if (permanentFailureReason(err) !== undefined || stopped || retries >= CHUNK_RETRY_DELAYS_MS.length) throw err;
          log.warn({ err, retry: retries + 1 }, 'SendBatch of a chunk failed; tried again with the same key');
          // Short next to the claim's lease (renewed per chunk); a takeover meanwhile would only replay (same key).
          await new Promise((r) => setTimeout(r, Math.min(CHUNK_RETRY_DELAYS_MS[retries++] ?? 0, deps.leaseMs / 10)));
          continue;
        }
        log.warn({ contactId: skipped.contactId, reason: isServiceError(err) ? err.details : undefined }, 'contact address refused by the emails service; contact skipped');
        emails = emails.filter((_, i) => i !== bad);
      }
    }
  }

  /**
   * One batch: its chunks are planned in order from the stored cursor (each the next `CHUNK_SIZE`
   * contacts, key `(batch, chunk)`), up to `chunksInFlight` handed over at once, and the cursor moves
   * over them strictly in order: after chunk n is accepted and every chunk before it was. So the
   * stored cursor never passes a chunk that was not accepted, and a crash, a failure or a lost claim
   * leaves later chunks that were already accepted to be asked again with the same keys (replays).
   * A pause or a stop stops the planning; the chunks already handed over finish and are recorded.
   */
  async function runBatch(s: SendingState): Promise<void> {
    const c = s.campaign;
    const log = deps.logger.child({ campaignId: c.id, batch: s.batchNo });
    if (!s.totalCounted) await deps.campaigns.setTotal(c.id, owner, await countTotal(c, s.cursor));
    const window = Math.max(1, deps.chunksInFlight ?? DEFAULT_CHUNKS_IN_FLIGHT);
    /** The next chunk to plan: where it starts, how much of the batch is planned, its number. */
    let plan = { cursor: s.cursor, sentInBatch: s.sentInBatch, chunkNo: s.chunkNo, done: false };
    interface InFlight { readonly failed: Promise<{ err: unknown } | undefined>; readonly after: typeof plan }
    const inFlight: InFlight[] = [];
    let done = false;
    /** The first chunk that failed, in chunk order: thrown once the chunks out finish; the cursor stays before it. */
    let failure: { err: unknown } | undefined;
    /** Reading the next contacts failed: the chunks already out still move the cursor, then this is thrown. */
    let readFailure: { err: unknown } | undefined;
    let halted: 'paused' | 'lost' | 'stopped' | undefined;
    /** A chunk handed over was refused or failed: nothing more is handed over (the batch ends in a retry or a pause). */
    let refused = false;
    for (;;) {
      while (!readFailure && !refused && !halted && !plan.done && plan.sentInBatch < c.batchSize && inFlight.length < window) {
        if (stopped) {
          halted = 'stopped';
          break;
        }
        const want = Math.min(CHUNK_SIZE, c.batchSize - plan.sentInBatch);
        let page: ContactsPage;
        try {
          page = await nextChunk(c, plan.cursor, want, c.batchSize - plan.sentInBatch);
        } catch (err) {
          readFailure = { err };
          break;
        }
        const sent = sendChunk(c, page.contacts, chunkIdempotencyKey(c.id, s.batchNo, plan.chunkNo), log);
        // At the end of the book the contacts service gives no next cursor: the campaign is complete.
        plan = { cursor: page.nextCursor ?? plan.cursor, sentInBatch: plan.sentInBatch + page.contacts.length, chunkNo: plan.chunkNo + 1, done: !page.nextCursor };
        inFlight.push({
          failed: sent.then(() => undefined, (err: unknown) => {
            refused = true;
            return { err };
          }),
          after: plan,
        });
      }
      const head = inFlight.shift();
      if (!head) break;
      const failed = await head.failed;
      // After a failure or a lost claim the cursor stays where it is: later chunks are only waited for.
      if (failure || halted === 'lost') continue;
      if (failed) {
        failure = failed;
        continue;
      }
      const status = await deps.campaigns.advance(c.id, owner, { cursor: head.after.cursor, sentInBatch: head.after.sentInBatch, chunkNo: head.after.chunkNo }, now(), deps.leaseMs);
      if (status === undefined) halted = 'lost';
      else {
        done = head.after.done;
        if (status !== 'SENDING' && !done) halted ??= 'paused';
      }
    }
    if (halted === 'lost') {
      log.info('campaign gone or claim lost; batch abandoned');
      return;
    }
    if (failure) throw failure.err;
    if (readFailure) throw readFailure.err;
    if (halted === 'stopped') return deps.campaigns.release(c.id, owner);
    if (halted === 'paused') {
      log.info('campaign paused mid-batch; the rest waits for a resume');
      await deps.campaigns.release(c.id, owner);
      return;
    }
    const t = now();
    await deps.campaigns.finishBatch(c.id, owner, done, new Date(t.getTime() + c.batchWindowMinutes * deps.windowUnitMs), t);
    log.info({ sentInBatch: plan.sentInBatch, completed: done }, done ? 'campaign completed' : 'batch handed over');
  }

  async function tick(): Promise<void> {
    await deps.campaigns.startDue(now());
    for (let i = 0; i < 100 && !stopped; i++) {
      const claimed = await deps.campaigns.claimDue(owner, now(), deps.leaseMs);
      if (!claimed) return;
      try {
        await runBatch(claimed);
      } catch (err) {
        const reason = permanentFailureReason(err);
        if (reason !== undefined) {
          // Retrying would be refused the same way: the campaign stops, with the reason on GET, until the
          // cause is fixed and it is resumed (the refused chunk's emails were never created, so none is lost).
          deps.logger.warn({ err, campaignId: claimed.campaign.id }, 'campaign batch refused permanently; campaign paused');
          await deps.campaigns.pauseWithReason(claimed.campaign.id, owner, reason, now());
          continue;
        }
        const delay = retryDelay(deps.retryDelayMs, claimed.failures + 1);
        deps.logger.warn({ err, campaignId: claimed.campaign.id, delayMs: delay }, 'campaign batch failed; retried after a delay');
        // Not at once, so a failing upstream is not hammered; the retry reuses the chunk's idempotency key.
        await deps.campaigns.backOff(claimed.campaign.id, owner, new Date(now().getTime() + delay));
      }
    }
  }

  function schedule(): void {
    if (running || stopped) return;
    running = tick()
      .catch((err: unknown) => deps.logger.warn({ err }, 'campaign sender pass failed; will retry'))
      .finally(() => {
        running = undefined;
      });
  }

  return {
    start() {
      stopped = false;
      timer = setInterval(schedule, deps.pollMs);
      timer.unref();
      schedule();
    },
    async tick() {
      while (running) await running;
      await tick();
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
