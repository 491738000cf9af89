import { randomUUID } from 'node:crypto';
import {
  AlreadyExistsError, ConflictError, createGroupCommit, InvalidArgumentError, newId, PermissionDeniedError, ResourceExhaustedError, type Logger,
} from '@mailfleet/kit';
import type { IdentitySource, QuotaGate, SendingIdentity, SuppressionChecker } from '../clients/upstreams.js';
import { domainOf, formatMailbox } from '../domain/addresses.js';
import { bodyHash, decideIdempotency, MAX_IDEMPOTENCY_KEY_LENGTH } from '../domain/idempotency.js';
import { renderEmail } from '../domain/render.js';
import type { EmailStatus } from '../domain/status.js';
import type { EventExtras } from '../domain/event-data.js';
import { MAX_BATCH, validateEmail, ValidationProblem, type EmailInput, type ValidatedEmail } from '../domain/validate.js';
import type { EmailsRepository, NewEmail } from '../repositories/emails.repository.js';
import type { IdempotencyRepository } from '../repositories/idempotency.repository.js';
import type { SendQueueRepository } from '../repositories/send-queue.repository.js';
import type { TemplateRecord, TemplatesRepository } from '../repositories/templates.repository.js';
import type { SendHandoff } from './send-worker.js';

export interface AcceptDeps {
  readonly emails: EmailsRepository;
  readonly queue: SendQueueRepository;
  readonly templates: TemplatesRepository;
  readonly idempotency: IdempotencyRepository;
  readonly identities: IdentitySource;
  readonly suppressions: SuppressionChecker;
  readonly quota: QuotaGate;
  readonly maxAttachmentsBytes: number;
  readonly idempotencyTtlMs: number;
  readonly idempotencyTakeoverMs: number;
  readonly logger: Logger;
  /**
   * The local worker's hand-off: due emails are inserted already leased to it and handed over in memory, so
   * no claim (a scan of the queue on FerretDB) is needed for them. Without it, or when it is full, entries are
   * inserted free and claimed.
   */
  readonly handoff?: SendHandoff;
  /** Due emails were stored without being handed over (no hand-off, it was full, or the entry was there): the local worker scans for them. */
  readonly onQueued?: () => void;
  /** How long the first accepted call waits for others to share its inserts. */
  readonly lingerMs?: number;
  readonly now?: () => Date;
}

export interface AcceptRequest {
  readonly teamId: string;
  readonly emails: readonly EmailInput[];
  readonly batch: boolean;
  readonly idempotencyKey?: string | undefined;
  /** Canonical hash of the public body, computed by the gateway; derived from `emails` when absent. */
  readonly bodyHash?: string | undefined;
  readonly restrictDomainId?: string | undefined;
}

export interface AcceptResult {
  readonly emailIds: readonly string[];
  readonly replayed: boolean;
}

/** One call's share of a group commit of accepts. */
interface AcceptWrite {
  readonly entries: readonly { emailId: string; due: Date }[];
  readonly docs: readonly NewEmail[];
}

interface Prepared {
  readonly v: ValidatedEmail;
  readonly identity: SendingIdentity;
  readonly template?: TemplateRecord | undefined;
  readonly rendered: ReturnType<typeof renderEmail>;
  readonly inReplyTo?: { messageId: string; references: readonly string[] } | undefined;
}

// Free-form metadata ends up in stored documents: its keys must be plain.
const BAD_METADATA_KEY = /^\$|\./;

function where(batch: boolean, index: number): string {
  return batch ? `emails[${index}]: ` : '';
}

/**
 * The accept path of POST /v1/emails and /v1/emails/batch: every check that
 * can refuse the request runs before anything is written (a bad batch item
 * is a 400 naming its index and nothing is queued), then the emails are
 * stored with their `email.queued` / `email.suppressed` /
 * `email.rendering_failure` events. Idempotency-Key claims are taken first
 * and released if the request fails, so a corrected retry may reuse the key.
 */
export function createAcceptor(deps: AcceptDeps) {
  const now = deps.now ?? (() => new Date());

  function invalid(batch: boolean, index: number, message: string, field?: string): InvalidArgumentError {
    return new InvalidArgumentError(`${where(batch, index)}${message}`, { details: batch ? { index, ...(field ? { field } : {}) } : field ? { field } : undefined });
  }

  async function prepare(req: AcceptRequest, validated: readonly ValidatedEmail[]): Promise<Prepared[]> {
    const templateIds = [...new Set(validated.map((v) => v.templateId).filter((t): t is string => Boolean(t)))];
    const templates = new Map<string, TemplateRecord>();
    await Promise.all(templateIds.map(async (id) => {
      const t = await deps.templates.get(req.teamId, id);
      if (t) templates.set(id, t);
    }));
    const domains = [...new Set(validated.map((v) => domainOf(v.from.address)))];
    const identities = new Map<string, Awaited<ReturnType<IdentitySource['lookup']>>>();
    await Promise.all(domains.map(async (d) => identities.set(d, await deps.identities.lookup(req.teamId, d))));
    const replyIds = [...new Set(validated.map((v) => v.inReplyToId).filter((t): t is string => Boolean(t)))];
    const replies = new Map<string, { messageId: string; references: readonly string[] }>();
    await Promise.all(replyIds.map(async (id) => {
      const m = await deps.emails.messageIdOf(req.teamId, id);
      if (m) replies.set(id, m);
    }));

    return validated.map((v, i) => {
      const domain = domainOf(v.from.address);
      const found = identities.get(domain);
      if (!found || found.kind === 'unknown') {
        throw invalid(req.batch, i, `from: the domain ${domain} is not a domain of this team; add and verify it first`, 'from');
      }
      if (found.kind === 'unverified') {
        if (req.restrictDomainId && found.domainId && found.domainId !== req.restrictDomainId) {
          throw new PermissionDeniedError(`${where(req.batch, i)}this API key may only send from its own domain`);
        }
        throw invalid(req.batch, i, `from: the domain ${domain} is not verified; verify its DNS records first`, 'from');
      }
      if (req.restrictDomainId && found.identity.domainId !== req.restrictDomainId) {
        throw new PermissionDeniedError(`${where(req.batch, i)}this API key may only send from its own domain, not ${domain}`, { details: req.batch ? { index: i } : undefined });
      }
      let template: TemplateRecord | undefined;
      if (v.templateId) {
        template = templates.get(v.templateId);
        if (!template) throw invalid(req.batch, i, `templateId: template ${v.templateId} not found`, 'templateId');
      }
      const html = v.html ?? template?.html;
      const text = v.text ?? template?.content;
      if (html === undefined && text === undefined) throw invalid(req.batch, i, 'the email has no body: the template has neither html nor content; give html or text', 'html');
      let inReplyTo: Prepared['inReplyTo'];
      if (v.inReplyToId) {
        inReplyTo = replies.get(v.inReplyToId);
        if (!inReplyTo) throw invalid(req.batch, i, `inReplyToId: email ${v.inReplyToId} not found`, 'inReplyToId');
      }
      const rendered = renderEmail({ subject: v.subject ?? template?.subject ?? '', html, text }, { variables: v.variables, usesTemplate: Boolean(template) });
      // Every placeholder's value is known now: a missing one is the caller's to fix, not a stored failure.
      if (!rendered.ok && rendered.missing.length > 0) throw invalid(req.batch, i, `variables: ${rendered.error}`, 'variables');
      return { v, identity: found.identity, template, rendered, inReplyTo };
    });
  }

  function build(req: AcceptRequest, p: Prepared, id: string, suppressed: ReadonlySet<string>, createdAt: Date): NewEmail {
    const { v, identity, rendered } = p;
    const events: { status: EmailStatus; extras?: EventExtras }[] = [];
    let pending: string[] = [];
    let hit: string[] = [];
    let failed: string[] = [];
    if (!rendered.ok) {
      failed = [...v.recipients];
      events.push({ status: 'RENDERING_FAILURE', extras: { details: { error: rendered.error, ...(rendered.missing.length ? { missing: rendered.missing } : {}) } } });
    } else {
      hit = v.recipients.filter((r) => suppressed.has(r));
      pending = v.recipients.filter((r) => !suppressed.has(r));
      if (hit.length > 0) {
        events.push({ status: 'SUPPRESSED', extras: { to: hit, details: { reason: 'The address is on the suppression list (bounced, complained, unsubscribed or added by hand)' } } });
      }
      if (pending.length > 0) {
        events.push({ status: 'QUEUED', extras: v.scheduledAt ? { details: { scheduledAt: v.scheduledAt.toISOString() } } : {} });
      }
    }
    const subject = rendered.ok ? rendered.subject : (v.subject ?? p.template?.subject ?? '');
    return {
      id,
      teamId: req.teamId,
      domainId: identity.domainId,
      from: formatMailbox(v.from),
      fromAddress: v.from.address,
      to: v.to.map(formatMailbox),
      toAddresses: v.to.map((m) => m.address),
      cc: v.cc.map(formatMailbox),
      bcc: v.bcc.map(formatMailbox),
      replyTo: v.replyTo.map(formatMailbox),
      subject,
      html: rendered.ok ? rendered.html : (v.html ?? p.template?.html),
      text: rendered.ok ? rendered.text : (v.text ?? p.template?.content),
      headers: Object.entries(v.headers),
      attachments: v.attachments,
      templateId: v.templateId,
      campaignId: v.campaignId,
      contactId: v.contactId,
      metadata: v.metadata,
      messageId: `<${id}@${identity.domainName}>`,
      inReplyTo: p.inReplyTo?.messageId,
      references: p.inReplyTo ? [...p.inReplyTo.references, p.inReplyTo.messageId].slice(-20) : [],
      scheduledAt: v.scheduledAt,
      pending,
      suppressed: hit,
      failed,
      events,
      createdAt,
    };
  }

  /**
   * Queue entries before the emails (written beside their contents): an entry whose email is not there yet is
   * skipped and looked at again, while an email without an entry would never be sent. A local worker that claims an entry meanwhile waits for the insert
   * (it then sends from what the insert wrote, without reading it back).
   */
  async function write(items: readonly AcceptWrite[]): Promise<void> {
    const docs = items.flatMap((i) => i.docs);
    const entries = items.flatMap((i) => i.entries);
    const at = now();
    // Due ones (not scheduled ahead) go to the local worker while its hand-off has room, leased to it from their
    // insert on. Only those this insert created are handed over: one already there (a retried accept) may be
    // free or another worker's.
    const due = entries.filter((e) => e.due.getTime() <= at.getTime());
    const place = deps.handoff?.reserve(due.length, at);
    const held = new Set(due.slice(0, place?.count ?? 0).map((e) => e.emailId));
    const done = deps.emails.writing(docs.map((d) => d.id));
    let inserted: { emailId: string; due: Date }[] = [];
    let written = false;
    try {
      // The entries are written beside the emails' contents, both before the emails themselves.
      const enqueued = deps.queue.enqueue(entries.map((e) => (place && held.has(e.emailId) ? { ...e, held: place.lease } : e)), at)
        .then((there) => {
          inserted = entries.filter((e) => held.has(e.emailId) && !there.has(e.emailId));
        });
      await deps.emails.insertMany(docs, { after: enqueued });
      written = true;
    } finally {
      done();
      // A failed emails insert gives its leased entries back: a worker then finds them orphaned or, after a
      // retry's insert, sends them, rather than waiting out the lease.
      place?.settle(written ? inserted : [], written ? [] : inserted.map((e) => e.emailId));
    }
    if (due.length > inserted.length) deps.onQueued?.();
  }

  /**
   * Calls that reach their writes within a few milliseconds share them: one insertMany per collection for
   * up to 100 emails (at least one whole call). Each call resolves once its own documents are written.
   */
  const writes = createGroupCommit<AcceptWrite, undefined>({
    maxItems: MAX_BATCH,
    maxDelayMs: deps.lingerMs ?? 2,
    weigh: (w) => Math.max(1, w.docs.length),
    flush: async (items) => {
      try {
        await write(items);
        return items.map(() => undefined);
      } catch (err) {
        if (items.length === 1) throw err;
        // Which call's documents failed is not worth untangling from a bulk error: each call is written again
        // on its own (inserts leave what is there already), so only the calls whose own writes fail fail.
        return Promise.all(items.map((i) => write([i]).then(() => undefined, (e: unknown) => (e instanceof Error ? e : new Error(String(e))))));
      }
    },
  });

  return async function accept(req: AcceptRequest): Promise<AcceptResult> {
    if (!req.teamId) throw new InvalidArgumentError('team_id is required');
    if (req.emails.length === 0) throw new InvalidArgumentError(req.batch ? 'The batch is empty: send 1 to 100 emails' : 'email is required');
    if (req.emails.length > MAX_BATCH) throw new InvalidArgumentError(`A batch holds at most ${MAX_BATCH} emails; this one has ${req.emails.length}`);
    const key = req.idempotencyKey;
    if (key !== undefined && (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH)) {
      throw new InvalidArgumentError(`Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`);
    }
    const started = now();

    // 1. Everything that needs nobody else.
    const validated = req.emails.map((input, i) => {
      try {
        for (const k of Object.keys(input.metadata ?? {})) {
          if (BAD_METADATA_KEY.test(k)) throw new ValidationProblem('metadata', `metadata key ${JSON.stringify(k)} must not contain '.' or start with '$'`);
        }
        return validateEmail(input, { maxAttachmentsBytes: deps.maxAttachmentsBytes, now: started });
      } catch (err) {
        if (err instanceof ValidationProblem) throw invalid(req.batch, i, err.message, err.field);
        throw err;
      }
    });

    // 2. The idempotency claim.
    let claim: { id: string; owner: string; plannedIds?: readonly string[] | undefined } | undefined;
    if (key !== undefined) {
      const hash = req.bodyHash || bodyHash(req.batch ? 'batch' : 'single', req.emails);
      const owner = randomUUID();
      const common = { teamId: req.teamId, key, bodyHash: hash, owner, ttlMs: deps.idempotencyTtlMs };
      const first = await deps.idempotency.claim({ ...common, now: started });
      if (first.claimed) {
        claim = { id: first.id, owner };
      } else {
        const existing = first.existing;
        const decision = decideIdempotency(existing, hash, started, deps.idempotencyTakeoverMs);
        const inProgress = () => new ConflictError('A request with this Idempotency-Key is still being processed; retry after it completes');
        switch (decision.kind) {
          case 'replay':
            return { emailIds: decision.emailIds, replayed: true };
          case 'mismatch':
            throw new AlreadyExistsError('This Idempotency-Key was already used with a different request body', { appCode: 'NOT_UNIQUE' });
          case 'in-progress':
            throw inProgress();
          case 'take-over':
            if (!(await deps.idempotency.takeOver(existing, owner, started))) throw inProgress();
            deps.logger.warn({ idempotencyId: existing.id }, 'taking over an idempotency claim left by a request that never finished');
            claim = { id: existing.id, owner, plannedIds: existing.emailIds };
            break;
          case 'expired':
            if (!(await deps.idempotency.reclaimExpired(existing, { bodyHash: hash, owner, now: started, ttlMs: deps.idempotencyTtlMs }))) throw inProgress();
            claim = { id: existing.id, owner };
            break;
        }
      }
    }

    let writing = false;
    try {
      // 3. Everything that asks other services or the database; still nothing written.
      const prepared = await prepare(req, validated);
      const renderable = prepared.filter((p) => p.rendered.ok);
      const allRecipients = [...new Set(renderable.flatMap((p) => p.v.recipients))];
      const suppressed = await deps.suppressions.suppressed(req.teamId, allRecipients);

      const ids = claim?.plannedIds && claim.plannedIds.length === prepared.length ? [...claim.plannedIds] : prepared.map(() => newId('em'));
      if (claim && !claim.plannedIds) {
        if (!(await deps.idempotency.setPlannedIds(claim.id, claim.owner, ids))) {
          throw new ConflictError('A request with this Idempotency-Key is still being processed; retry after it completes');
        }
      }
      const createdAt = now();
      const docs = prepared.map((p, i) => build(req, p, ids[i]!, suppressed, createdAt));

      // 4. The plan quota, for the emails that will actually be sent.
      const sendable = docs.filter((d) => d.pending.length > 0).length;
      if (sendable > 0) {
        const verdict = await deps.quota.consume(req.teamId, sendable);
        if (!verdict.allowed) {
          throw new ResourceExhaustedError(
            `${verdict.quota === 'daily' ? 'Daily' : 'Monthly'} email quota of ${verdict.limit} reached: ${sendable} more email${sendable > 1 ? 's' : ''} would exceed it`,
            { appCode: 'QUOTA_EXCEEDED', details: { quota: verdict.quota, limit: verdict.limit } },
          );
        }
      }

      // 5. Written. From here on the claim is kept even on failure: it holds the ids, so a takeover
      // (after the processing timeout) inserts exactly these emails and never a second set.
      writing = true;
      await writes.submit({
        entries: docs.filter((d) => d.pending.length > 0).map((d) => ({
          emailId: d.id, due: d.scheduledAt && d.scheduledAt > createdAt ? d.scheduledAt : createdAt,
        })),
        docs,
      });
      if (claim) await deps.idempotency.complete(claim.id, claim.owner, ids);
      return { emailIds: ids, replayed: false };
    } catch (err) {
      if (claim && !writing) await deps.idempotency.release(claim.id, claim.owner).catch((e: unknown) => deps.logger.warn({ err: e }, 'could not release an idempotency claim'));
      throw err;
    }
  };
}

export type Acceptor = ReturnType<typeof createAcceptor>;
