import {
  ConflictError, FailedPreconditionError, InvalidArgumentError, newId, NotFoundError, type Logger, type UnaryHandlers,
} from '@mailfleet/kit';
import type { emailsV1 } from '@mailfleet/proto';
import { platformOf, verifyTrackingToken } from '../domain/tracking.js';
import { MAX_SCHEDULE_AHEAD_MS } from '../domain/validate.js';
import type { EmailRecord, EmailsRepository, Mutation } from '../repositories/emails.repository.js';
import type { SendQueueRepository } from '../repositories/send-queue.repository.js';
import type { TemplatesRepository } from '../repositories/templates.repository.js';
import type { Acceptor } from '../sending/accept.js';
import { withQueueLock, type HandoffWithdrawal } from '../sending/queue-sync.js';
import { emailToProto, eventToProto, feedbackToProto, inputFromProto, statusFromProto, templateToProto } from './mapping.js';

export interface EmailsRpcDeps {
  readonly emails: EmailsRepository;
  readonly queue: SendQueueRepository;
  readonly templates: TemplatesRepository;
  readonly accept: Acceptor;
  readonly trackingKey: string;
  readonly logger: Logger;
  /** The local worker's hand-off: a change withdraws an email it holds and has not started (see withQueueLock). */
  readonly handoff?: HandoffWithdrawal;
  /** A queued email became due now (PATCH with null): wake the local worker. */
  readonly onDue?: () => void;
  readonly now?: () => Date;
}

/** Stored open and click events per email; later ones are still published (webhooks, analytics) but not kept. */
export const MAX_STORED_TRACKING_EVENTS = 200;
const MAX_TEMPLATE_NAME = 200;

function required(value: string, field: string): string {
  if (!value) throw new InvalidArgumentError(`${field} is required`);
  return value;
}

function paging(page: number, limit: number, def: number, max: number): { page: number; limit: number } {
  const p = page === 0 ? 1 : page;
  const l = limit === 0 ? def : limit;
  if (!Number.isInteger(p) || p < 1) throw new InvalidArgumentError('page must be at least 1');
  if (!Number.isInteger(l) || l < 1 || l > max) throw new InvalidArgumentError(`limit must be between 1 and ${max}`);
  return { page: p, limit: l };
}

function templateName(name: string): string {
  const n = name.trim();
  if (n.length < 1) throw new InvalidArgumentError('name must be at least 1 character');
  if (n.length > MAX_TEMPLATE_NAME) throw new InvalidArgumentError(`name must be at most ${MAX_TEMPLATE_NAME} characters`);
  return n;
}

/** Why an email can no longer be rescheduled or cancelled, or undefined when it still can (a send in progress is the queue lock's business). */
function notChangeable(e: EmailRecord, what: 'rescheduled' | 'cancelled'): Error | undefined {
  if (e.sentAt || e.recipients.accepted.length > 0) return new FailedPreconditionError(`Email ${e.id} has already been sent; it can no longer be ${what}`);
  if (e.sendState !== 'PENDING') {
    return new FailedPreconditionError(`Email ${e.id} is ${e.latestStatus.toLowerCase().replace('_', ' ')} and will not be sent; it can no longer be ${what}`);
  }
  return undefined;
}

export function createEmailsHandlers(deps: EmailsRpcDeps): UnaryHandlers<emailsV1.EmailsServiceServer> {
  const now = deps.now ?? (() => new Date());

  async function track(token: string, kind: 'open' | 'click', userAgent: string, ip: string): Promise<{ recorded: boolean; url?: string }> {
    const claims = verifyTrackingToken(deps.trackingKey, token, kind);
    if (!claims) throw new InvalidArgumentError('Invalid tracking link');
    const at = now();
    const details = { timestamp: at.toISOString(), userAgent, ip, platform: platformOf(userAgent) };
    const res = await deps.emails.mutate(claims.emailId, (e) => {
      const store = e.trackingEventCount < MAX_STORED_TRACKING_EVENTS;
      const event = kind === 'open'
        ? { status: 'OPENED' as const, extras: { open: details }, store }
        : { status: 'CLICKED' as const, extras: { click: { ...details, url: claims.url ?? '' } }, store };
      return { events: [event], incTracking: true };
    });
    return { recorded: Boolean(res?.applied), url: claims.url };
  }

  /**
   * NOT_FOUND unless the email is the team's (and of `domainId`, a restricted key's domain). The write
   * that follows is by id: an email's team and domain never change, so this check cannot go stale.
   */
  async function existing(teamId: string, id: string, domainId: string | undefined): Promise<void> {
    if (!(await deps.emails.messageIdOf(teamId, id, domainId || undefined))) throw new NotFoundError('Email not found');
  }

  /**
   * Why a change found the email's queue entry held by a worker: an email that worker has finished (its entry
   * goes shortly after the outcome is written) can no longer be changed at all; any other is being sent.
   */
  async function whyBusy(teamId: string, id: string, what: 'rescheduled' | 'cancelled'): Promise<Error> {
    const e = await deps.emails.getById(id);
    return (e && e.teamId === teamId ? notChangeable(e, what) : undefined)
      ?? new ConflictError(`Email ${id} is being sent right now; it can no longer be ${what}`);
  }

  return {
    async sendEmail(req) {
      if (!req.email) throw new InvalidArgumentError('email is required');
      const res = await deps.accept({
        teamId: req.teamId, emails: [inputFromProto(req.email)], batch: false,
        idempotencyKey: req.idempotencyKey, bodyHash: req.bodyHash, restrictDomainId: req.restrictDomainId,
      });
      return { emailId: res.emailIds[0] ?? '', replayed: res.replayed };
    },

    async sendBatch(req) {
      const res = await deps.accept({
        teamId: req.teamId, emails: req.emails.map(inputFromProto), batch: true,
        idempotencyKey: req.idempotencyKey, bodyHash: req.bodyHash, restrictDomainId: req.restrictDomainId,
      });
      return { emailIds: [...res.emailIds], replayed: res.replayed };
    },

    async listEmails(req) {
      const { page, limit } = paging(req.page, req.limit, 20, 20);
      if (req.startDate && req.endDate && req.startDate > req.endDate) throw new InvalidArgumentError('startDate must not be after endDate');
      const { items, count } = await deps.emails.list(required(req.teamId, 'team_id'), {
        startDate: req.startDate, endDate: req.endDate, domainIds: req.domainIds,
      }, page, limit);
      return { emails: items.map(emailToProto), count };
    },

    async getEmail(req) {
      const e = await deps.emails.get(required(req.teamId, 'team_id'), required(req.emailId, 'email_id'), req.restrictDomainId || undefined);
      if (!e) throw new NotFoundError('Email not found');
      const events = [...e.events].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
      return { email: emailToProto(e), events: events.map((ev) => eventToProto(e, ev)) };
    },

    async listEmailEvents(req) {
      const { page, limit } = paging(req.page, req.limit, 50, 100);
      const e = await deps.emails.get(required(req.teamId, 'team_id'), required(req.emailId, 'email_id'), req.restrictDomainId || undefined);
      if (!e) throw new NotFoundError('Email not found');
      const status = req.status ? statusFromProto(req.status) : undefined;
      if (req.status && !status) throw new InvalidArgumentError('Unknown status');
      const start = req.startDate?.getTime();
      const events = e.events
        .map((ev, i) => ({ ev, i }))
        .filter(({ ev }) => (!status || ev.status === status) && (start === undefined || ev.createdAt.getTime() > start))
        // Newest first; events written together keep their order.
        .sort((a, b) => b.ev.createdAt.getTime() - a.ev.createdAt.getTime() || b.i - a.i)
        .map(({ ev }) => ev);
      const slice = events.slice((page - 1) * limit, page * limit);
      return { events: slice.map((ev) => eventToProto(e, ev)), page, limit };
    },

    async updateSchedule(req) {
      const teamId = required(req.teamId, 'team_id');
      const id = required(req.emailId, 'email_id');
      const at = now();
      const when = req.scheduledAt;
      if (when && Number.isNaN(when.getTime())) throw new InvalidArgumentError('scheduledAt is not a valid date');
      if (when && when.getTime() - at.getTime() > MAX_SCHEDULE_AHEAD_MS) throw new InvalidArgumentError('scheduledAt may be at most 365 days ahead');
      await existing(teamId, id, req.restrictDomainId);
      const locked = await withQueueLock(deps, id, () => deps.emails.mutate(id, (e): Mutation => {
        const problem = notChangeable(e, 'rescheduled');
        if (problem) throw problem;
        const due = when && when > now() ? when : now();
        return when
          ? { set: { scheduledAt: when, nextAttemptAt: due } }
          : { set: { nextAttemptAt: due }, unset: ['scheduledAt'] };
      }, { teamId, now }));
      if (locked.busy) throw await whyBusy(teamId, id, 'rescheduled');
      if (!locked.result) throw new NotFoundError('Email not found');
      if (!when || when <= now()) deps.onDue?.();
      return { emailId: id };
    },

    async cancelEmail(req) {
      const teamId = required(req.teamId, 'team_id');
      const id = required(req.emailId, 'email_id');
      await existing(teamId, id, req.restrictDomainId);
      const locked = await withQueueLock(deps, id, () => deps.emails.mutate(id, (e): Mutation | null => {
        if (e.latestStatus === 'CANCELLED' && e.sendState === 'DONE') return null;
        const problem = notChangeable(e, 'cancelled');
        if (problem) throw problem;
        return {
          set: { sendState: 'DONE', 'recipients.pending': [], 'recipients.failed': [...e.recipients.failed, ...e.recipients.pending] },
          unset: ['nextAttemptAt'],
          events: [{ status: 'CANCELLED' }],
        };
      }, { teamId, now }));
      if (locked.busy) throw await whyBusy(teamId, id, 'cancelled');
      if (!locked.result) throw new NotFoundError('Email not found');
      return { emailId: id };
    },

    async listBounces(req) {
      const { page, limit } = paging(req.page, req.limit, 20, 100);
      const { items, count } = await deps.emails.listFeedback(required(req.teamId, 'team_id'), 'bounce', page, limit, req.restrictDomainId || undefined);
      return { bounces: items.map(feedbackToProto), count };
    },

    async listComplaints(req) {
      const { page, limit } = paging(req.page, req.limit, 20, 100);
      const { items, count } = await deps.emails.listFeedback(required(req.teamId, 'team_id'), 'complaint', page, limit, req.restrictDomainId || undefined);
      return { complaints: items.map(feedbackToProto), count };
    },

    async createTemplate(req) {
      const at = now();
      const t = await deps.templates.create({
        id: newId('tpl'), teamId: required(req.teamId, 'team_id'), name: templateName(req.name), subject: req.subject,
        html: req.html, content: req.content, createdAt: at, updatedAt: at,
      });
      return { template: templateToProto(t) };
    },

    async listTemplates(req) {
      return { templates: (await deps.templates.list(required(req.teamId, 'team_id'))).map(templateToProto) };
    },

    async getTemplate(req) {
      const t = await deps.templates.get(required(req.teamId, 'team_id'), required(req.templateId, 'template_id'));
      if (!t) throw new NotFoundError('Template not found');
      return { template: templateToProto(t) };
    },

    async updateTemplate(req) {
      const t = await deps.templates.update(required(req.teamId, 'team_id'), required(req.templateId, 'template_id'), {
        name: req.name === undefined ? undefined : templateName(req.name), subject: req.subject, html: req.html, content: req.content,
      }, now());
      if (!t) throw new NotFoundError('Template not found');
      return { template: templateToProto(t) };
    },

    async deleteTemplate(req) {
      const ok = await deps.templates.delete(required(req.teamId, 'team_id'), required(req.templateId, 'template_id'));
      if (!ok) throw new NotFoundError('Template not found');
      return {};
    },

    async deleteCampaignEmails(req) {
      const teamId = required(req.teamId, 'team_id');
      const campaignId = required(req.campaignId, 'campaign_id');
      const at = now();
      let cancelled = 0;
      for (const id of await deps.emails.pendingOfCampaign(teamId, campaignId)) {
        // One being sent right now finishes; it is deleted with the rest below.
        const locked = await withQueueLock(deps, id, () => deps.emails.mutate(id, (e): Mutation | null => {
          if (e.sendState !== 'PENDING') return null;
          return {
            set: { sendState: 'DONE', 'recipients.pending': [], 'recipients.failed': [...e.recipients.failed, ...e.recipients.pending], _deletedAt: at },
            unset: ['nextAttemptAt'],
            events: [{ status: 'CANCELLED', extras: { details: { reason: 'campaign deleted' } } }],
          };
        }, { teamId, now }));
        if (!locked.busy && locked.result?.applied) cancelled++;
      }
      const rest = await deps.emails.tombstoneCampaign(teamId, campaignId, at);
      return { deletedCount: cancelled + rest };
    },

    async recordOpen(req) {
      const r = await track(req.token, 'open', req.userAgent, req.ip);
      return { recorded: r.recorded };
    },

    async recordClick(req) {
      const r = await track(req.token, 'click', req.userAgent, req.ip);
      return { url: r.url ?? '', recorded: r.recorded };
    },
  };
}
