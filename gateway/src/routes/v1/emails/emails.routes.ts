import { emailsV1 } from '@mailfleet/proto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf } from '../../../plugins/auth.plugin.js';
import { GatewayError } from '../../../plugins/errors.plugin.js';
import { iso, nullableString, nullableTimestamp, pageParam, timestamp } from '../../../schemas/common.js';

const STATUSES = [
  'QUEUED', 'SENT', 'DELIVERED', 'BOUNCED', 'COMPLAINED', 'OPENED', 'CLICKED',
  'DELIVERY_DELAYED', 'REJECTED', 'RENDERING_FAILURE', 'FAILED', 'CANCELLED', 'SUPPRESSED',
] as const;
type Status = (typeof STATUSES)[number];

function statusName(s: emailsV1.EmailStatus): string {
  return emailsV1.emailStatusToJSON(s).replace(/^EMAIL_STATUS_/, '');
}
function statusFromName(s: Status): emailsV1.EmailStatus {
  return emailsV1.emailStatusFromJSON(`EMAIL_STATUS_${s}`);
}

const optionalString = { type: ['string', 'null'] } as const;
const addressField = {
  anyOf: [
    { type: 'string', minLength: 1, maxLength: 2000 },
    { type: 'array', maxItems: 50, items: { type: 'string', minLength: 1, maxLength: 2000 } },
    { type: 'null' },
  ],
} as const;

/** The single-send schema (SPEC 4.2); the batch is an array of these. */
const sendBody = {
  type: 'object',
  required: ['to', 'from'],
  properties: {
    to: { ...addressField, description: 'recipient, or an array of recipients (`a@x.com` or `Name <a@x.com>`)' },
    from: { type: 'string', minLength: 1, maxLength: 1000, description: 'sender on a verified domain of the team' },
    subject: { ...optionalString, description: 'required unless templateId is given' },
    html: { ...optionalString, description: 'one of html, text or templateId is required' },
    text: optionalString,
    templateId: { ...optionalString, description: 'template of the team; its subject, html and content are used unless given here' },
    variables: { type: ['object', 'null'], additionalProperties: true, description: 'values of {{key}} placeholders (HTML-escaped in html)' },
    replyTo: addressField,
    cc: addressField,
    bcc: addressField,
    headers: { type: ['object', 'null'], additionalProperties: { type: 'string' }, description: 'custom SMTP headers' },
    attachments: {
      type: ['array', 'null'],
      maxItems: 10,
      items: {
        type: 'object',
        required: ['filename', 'content'],
        properties: { filename: { type: 'string', minLength: 1, maxLength: 255 }, content: { type: 'string', description: 'base64' } },
      },
    },
    scheduledAt: { ...optionalString, description: 'ISO 8601; absent sends at once' },
    inReplyToId: { ...optionalString, description: 'id of the email this one replies to (sets In-Reply-To and References)' },
  },
} as const;

interface SendBody {
  to: string | string[] | null;
  from: string;
  subject?: string | null;
  html?: string | null;
  text?: string | null;
  templateId?: string | null;
  variables?: Record<string, unknown> | null;
  replyTo?: string | string[] | null;
  cc?: string | string[] | null;
  bcc?: string | string[] | null;
  headers?: Record<string, string> | null;
  attachments?: { filename: string; content: string }[] | null;
  scheduledAt?: string | null;
  inReplyToId?: string | null;
}

const ISO_8601 = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/** A Date from an ISO 8601 string, or a 400 naming the field. */
function parseIso(value: string, field: string): Date {
  const d = new Date(value);
  if (!ISO_8601.test(value.trim()) || Number.isNaN(d.getTime())) throw new GatewayError(400, `${field} must be an ISO 8601 date, e.g. 2030-01-31T09:00:00Z`);
  return d;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function list(v: string | string[] | null | undefined): string[] {
  if (v === null || v === undefined) return [];
  return Array.isArray(v) ? v : [v];
}

function orUndefined<T>(v: T | null | undefined): T | undefined {
  return v === null ? undefined : v;
}

/** Public body -> OutgoingEmail; the checks that need the raw JSON (base64, date syntax) happen here. */
function toOutgoing(body: SendBody, where: string): emailsV1.OutgoingEmail {
  const attachments = (body.attachments ?? []).map((a, i) => {
    const content = a.content.replace(/\s+/g, '');
    if (!BASE64.test(content)) throw new GatewayError(400, `${where}attachments[${i}].content is not valid base64`);
    return { filename: a.filename, content: Buffer.from(content, 'base64') };
  });
  return {
    to: list(body.to),
    from: body.from,
    subject: orUndefined(body.subject),
    html: orUndefined(body.html),
    text: orUndefined(body.text),
    templateId: orUndefined(body.templateId),
    variables: orUndefined(body.variables),
    replyTo: list(body.replyTo),
    cc: list(body.cc),
    bcc: list(body.bcc),
    headers: body.headers ?? {},
    attachments,
    scheduledAt: body.scheduledAt ? parseIso(body.scheduledAt, `${where}scheduledAt`) : undefined,
    inReplyToId: orUndefined(body.inReplyToId),
  };
}

function idempotencyKeyOf(req: FastifyRequest): string | undefined {
  const raw = req.headers['idempotency-key'];
  if (raw === undefined) return undefined;
  const key = Array.isArray(raw) ? raw[0] ?? '' : raw;
  if (key.length === 0 || key.length > 256) throw new GatewayError(400, 'Idempotency-Key must be 1 to 256 characters');
  return key;
}

const emailIdResponse = { type: 'object', required: ['emailId'], properties: { emailId: { type: 'string' } } } as const;
const emailIdParam = { type: 'object', required: ['emailId'], properties: { emailId: { type: 'string', minLength: 1, maxLength: 200 } } } as const;
const nullableList = { type: ['array', 'null'], items: { type: 'string' } } as const;

/** SPEC 2.2. */
const emailListItem = {
  type: 'object',
  required: ['id', 'to', 'from', 'subject', 'html', 'text', 'latestStatus', 'scheduledAt', 'domainId', 'createdAt', 'updatedAt', 'replyTo', 'cc', 'bcc'],
  properties: {
    id: { type: 'string' },
    to: { type: 'array', items: { type: 'string' } },
    from: { type: 'string' },
    subject: { type: 'string' },
    html: nullableString,
    text: nullableString,
    latestStatus: { type: 'string', enum: STATUSES },
    scheduledAt: nullableTimestamp,
    domainId: { type: 'string' },
    createdAt: timestamp,
    updatedAt: timestamp,
    replyTo: nullableList,
    cc: nullableList,
    bcc: nullableList,
  },
} as const;

const eventData = { type: 'object', additionalProperties: true, description: 'free-form: the event payload (SPEC 6.3), with the server response or bounce reason' } as const;

/** SPEC 2.3. */
const emailDetail = {
  type: 'object',
  required: [...emailListItem.required, 'teamId', 'emailEvents'],
  properties: {
    ...emailListItem.properties,
    teamId: { type: 'string' },
    emailEvents: {
      type: 'array',
      description: 'oldest first',
      items: {
        type: 'object',
        required: ['emailId', 'status', 'createdAt', 'data'],
        properties: { emailId: { type: 'string' }, status: { type: 'string', enum: STATUSES }, createdAt: timestamp, data: eventData },
      },
    },
  },
} as const;

/** SPEC 2.5. */
const emailEvent = {
  type: 'object',
  required: ['id', 'emailId', 'status', 'data', 'teamId', 'createdAt'],
  properties: { id: { type: 'string' }, emailId: { type: 'string' }, status: { type: 'string', enum: STATUSES }, data: eventData, teamId: { type: 'string' }, createdAt: timestamp },
} as const;

/** SPEC 2.6. */
const feedbackItem = {
  type: 'object',
  required: ['id', 'email', 'subject', 'status', 'createdAt'],
  properties: { id: { type: 'string', description: 'email id' }, email: { type: 'string' }, subject: { type: 'string' }, status: { type: 'string' }, createdAt: timestamp },
} as const;

/** SPEC 2.7. */
const unsubscribeItem = {
  type: 'object',
  required: ['id', 'email', 'firstName', 'lastName', 'reason', 'contactBookId', 'createdAt'],
  properties: {
    id: { type: 'string', description: 'contact id' }, email: { type: 'string' }, firstName: { type: 'string' }, lastName: { type: 'string' },
    reason: { type: 'string' }, contactBookId: { type: 'string' }, createdAt: timestamp,
  },
} as const;

/** int32 bound of the RPCs' page field. */
const feedbackQuery = {
  type: 'object',
  properties: { page: pageParam, limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
} as const;

function nonEmpty(v: readonly string[]): string[] | null {
  return v.length > 0 ? [...v] : null;
}

function toListItem(e: emailsV1.Email) {
  return {
    id: e.id, to: e.to, from: e.from, subject: e.subject, html: e.html ?? null, text: e.text ?? null, latestStatus: statusName(e.latestStatus),
    scheduledAt: iso(e.scheduledAt), domainId: e.domainId, createdAt: iso(e.createdAt), updatedAt: iso(e.updatedAt),
    replyTo: nonEmpty(e.replyTo), cc: nonEmpty(e.cc), bcc: nonEmpty(e.bcc),
  };
}

function toEvent(ev: emailsV1.EmailEvent) {
  return { id: ev.id, emailId: ev.emailId, status: statusName(ev.status), data: ev.data ?? {}, teamId: ev.teamId, createdAt: iso(ev.createdAt) };
}

function toFeedback(f: emailsV1.FeedbackItem) {
  return { id: f.emailId, email: f.email, subject: f.subject, status: statusName(f.status), createdAt: iso(f.createdAt) };
}

/**
 * SPEC 4.2: send (single, batch, scheduled, idempotent), read emails and their
 * events, reschedule and cancel, bounces, complaints and unsubscribes. Errors
 * as `{code, message}`; a send with a SENDING key is allowed; a
 * domain-restricted key may only send from its own domain (403).
 */
export function emailsRoutes(deps: { upstreams: Upstreams }) {
  const { emails, contacts } = deps.upstreams;
  return async (app: FastifyInstance): Promise<void> => {
    app.post<{ Body: SendBody }>('/emails', {
      config: { errorForm: 'code', allowSendingKeys: true, rateLimit: { family: 'SEND_EMAIL' } },
      schema: {
        tags: ['Emails'],
        summary: 'Send an email',
        description: 'Optional header Idempotency-Key (max 256 characters): the same key and body within 24 hours return the original emailId and send nothing; another body is 409 NOT_UNIQUE; while the first request runs, 409.',
        body: sendBody,
        response: { 200: emailIdResponse },
      },
    }, async (req) => {
      const p = principalOf(req);
      const res = await emails.call.sendEmail({
        teamId: p.teamId, email: toOutgoing(req.body, ''), idempotencyKey: idempotencyKeyOf(req), restrictDomainId: p.domainId, apiKeyId: p.keyId,
      });
      return { emailId: res.emailId };
    });

    app.post<{ Body: SendBody[] }>('/emails/batch', {
      config: {
        errorForm: 'code', allowSendingKeys: true,
        rateLimit: { family: 'BATCH_EMAIL', cost: (req) => (Array.isArray(req.body) ? req.body.length : 1) },
      },
      schema: {
        tags: ['Emails'],
        summary: 'Send up to 100 emails as one unit',
        description: 'Every item is validated first; one bad item is a 400 naming its index and nothing is sent. Idempotency-Key as for a single send.',
        body: { type: 'array', minItems: 1, maxItems: 100, items: sendBody },
        response: {
          200: {
            type: 'object', required: ['data'],
            properties: { data: { type: 'array', items: emailIdResponse } },
          },
        },
      },
    }, async (req) => {
      const p = principalOf(req);
      const res = await emails.call.sendBatch({
        teamId: p.teamId, emails: req.body.map((b, i) => toOutgoing(b, `emails[${i}].`)), idempotencyKey: idempotencyKeyOf(req),
        restrictDomainId: p.domainId, apiKeyId: p.keyId,
      });
      return { data: res.emailIds.map((emailId) => ({ emailId })) };
    });

    app.get<{ Querystring: { page: number; limit: number; startDate?: string; endDate?: string; domainId?: string[] } }>('/emails', {
      config: { errorForm: 'code', rateLimit: { family: 'READ_EMAIL' } },
      schema: {
        tags: ['Emails'],
        summary: 'List emails, newest first',
        querystring: {
          type: 'object',
          properties: {
            page: pageParam,
            limit: { type: 'integer', minimum: 1, maximum: 20, default: 20 },
            startDate: { type: 'string', description: 'ISO 8601: emails created at or after' },
            endDate: { type: 'string', description: 'ISO 8601: emails created at or before' },
            domainId: { type: 'array', items: { type: 'string', minLength: 1 }, maxItems: 100, description: 'one or more domain ids' },
          },
        },
        response: {
          200: { type: 'object', required: ['data', 'count'], properties: { data: { type: 'array', items: emailListItem }, count: { type: 'integer' } } },
        },
      },
    }, async (req) => {
      const p = principalOf(req);
      const q = req.query;
      let domainIds = q.domainId ?? [];
      // A domain-restricted key sees the emails of its own domain only.
      if (p.domainId) domainIds = domainIds.length === 0 ? [p.domainId] : domainIds.filter((d) => d === p.domainId);
      if (p.domainId && domainIds.length === 0) return { data: [], count: 0 };
      const res = await emails.call.listEmails({
        teamId: p.teamId, page: q.page, limit: q.limit, domainIds,
        startDate: q.startDate ? parseIso(q.startDate, 'startDate') : undefined,
        endDate: q.endDate ? parseIso(q.endDate, 'endDate') : undefined,
      });
      return { data: res.emails.map(toListItem), count: res.count };
    });

    for (const [path, kind] of [['/emails/bounces', 'bounces'], ['/emails/complaints', 'complaints']] as const) {
      app.get<{ Querystring: { page: number; limit: number } }>(path, {
        config: { errorForm: 'code', rateLimit: { family: 'FEEDBACK_LIST' } },
        schema: {
          tags: ['Emails'],
          summary: kind === 'bounces' ? 'Bounced emails, newest first' : 'Emails marked as spam, newest first',
          querystring: feedbackQuery,
          response: { 200: { type: 'object', required: ['data', 'count'], properties: { data: { type: 'array', items: feedbackItem }, count: { type: 'integer' } } } },
        },
      }, async (req) => {
        const p = principalOf(req);
        // A domain-restricted key lists the bounces and complaints of its own domain's emails only.
        const scope = { teamId: p.teamId, restrictDomainId: p.domainId, page: req.query.page, limit: req.query.limit };
        if (kind === 'bounces') {
          const res = await emails.call.listBounces(scope);
          return { data: res.bounces.map(toFeedback), count: res.count };
        }
        const res = await emails.call.listComplaints(scope);
        return { data: res.complaints.map(toFeedback), count: res.count };
      });
    }

    app.get<{ Querystring: { page: number; limit: number } }>('/emails/unsubscribes', {
      config: { errorForm: 'code', rateLimit: { family: 'FEEDBACK_LIST' } },
      schema: {
        tags: ['Emails'],
        summary: 'Unsubscribed contacts, newest first',
        querystring: feedbackQuery,
        response: { 200: { type: 'object', required: ['data', 'count'], properties: { data: { type: 'array', items: unsubscribeItem }, count: { type: 'integer' } } } },
      },
    }, async (req) => {
      const p = principalOf(req);
      // Contacts (and so their unsubscribes) belong to the team, not to a sending domain: a
      // domain-restricted key has no unsubscribe of its domain to see.
      if (p.domainId) return { data: [], count: 0 };
      const res = await contacts.call.listUnsubscribes({ teamId: p.teamId, page: req.query.page, limit: req.query.limit });
      return {
        count: res.count,
        data: res.unsubscribes.map((u) => ({
          id: u.contactId, email: u.email, firstName: u.firstName, lastName: u.lastName, reason: u.reason, contactBookId: u.contactBookId, createdAt: iso(u.createdAt),
        })),
      };
    });

    app.get<{ Params: { emailId: string } }>('/emails/:emailId', {
      config: { errorForm: 'code', rateLimit: { family: 'READ_EMAIL' } },
      schema: { tags: ['Emails'], summary: 'An email with its events, oldest first', params: emailIdParam, response: { 200: emailDetail } },
    }, async (req) => {
      // A domain-restricted key finds only its domain's emails (404 otherwise, as for another team's).
      const p = principalOf(req);
      const res = await emails.call.getEmail({ teamId: p.teamId, emailId: req.params.emailId, restrictDomainId: p.domainId });
      const e = res.email!;
      return {
        ...toListItem(e),
        teamId: e.teamId,
        emailEvents: res.events.map((ev) => ({ emailId: ev.emailId, status: statusName(ev.status), createdAt: iso(ev.createdAt), data: ev.data ?? {} })),
      };
    });

    app.get<{ Params: { emailId: string }; Querystring: { page: number; limit: number; status?: Status; startDate?: string } }>('/emails/:emailId/events', {
      config: { errorForm: 'code', rateLimit: { family: 'READ_EMAIL' } },
      schema: {
        tags: ['Emails'],
        summary: 'The events of one email, newest first',
        params: emailIdParam,
        querystring: {
          type: 'object',
          properties: {
            page: pageParam,
            limit: { type: 'integer', minimum: 1, maximum: 100, default: 50 },
            status: { type: 'string', enum: STATUSES },
            startDate: { type: 'string', description: 'ISO 8601: events after' },
          },
        },
        response: {
          200: {
            type: 'object', required: ['events', 'page', 'limit'],
            properties: { events: { type: 'array', items: emailEvent }, page: { type: 'integer' }, limit: { type: 'integer' } },
          },
        },
      },
    }, async (req) => {
      const q = req.query;
      const p = principalOf(req);
      const res = await emails.call.listEmailEvents({
        teamId: p.teamId, restrictDomainId: p.domainId, emailId: req.params.emailId, page: q.page, limit: q.limit,
        status: q.status ? statusFromName(q.status) : emailsV1.EmailStatus.EMAIL_STATUS_UNSPECIFIED,
        startDate: q.startDate ? parseIso(q.startDate, 'startDate') : undefined,
      });
      return { events: res.events.map(toEvent), page: res.page, limit: res.limit };
    });

    app.patch<{ Params: { emailId: string }; Body: { scheduledAt: string | null } }>('/emails/:emailId', {
      config: { errorForm: 'code' },
      schema: {
        tags: ['Emails'],
        summary: 'Reschedule a scheduled email, or send it now (null)',
        description: 'Only while the email has not been sent: 400 once it was sent, cancelled or failed; 409 while it is being sent.',
        params: emailIdParam,
        body: { type: 'object', required: ['scheduledAt'], properties: { scheduledAt: { type: ['string', 'null'], description: 'ISO 8601, or null to send now' } } },
        response: { 200: emailIdResponse },
      },
    }, async (req) => {
      const at = req.body.scheduledAt;
      const p = principalOf(req);
      const res = await emails.call.updateSchedule({
        teamId: p.teamId, restrictDomainId: p.domainId, emailId: req.params.emailId, scheduledAt: at === null ? undefined : parseIso(at, 'scheduledAt'),
      });
      return { emailId: res.emailId };
    });

    app.post<{ Params: { emailId: string } }>('/emails/:emailId/cancel', {
      config: { errorForm: 'code' },
      schema: {
        tags: ['Emails'],
        summary: 'Cancel an email that has not been sent',
        description: '400 once the email was sent (or failed); 409 while it is being sent.',
        params: emailIdParam,
        response: { 200: emailIdResponse },
      },
    }, async (req) => {
      const p = principalOf(req);
      const res = await emails.call.cancelEmail({ teamId: p.teamId, restrictDomainId: p.domainId, emailId: req.params.emailId });
      return { emailId: res.emailId };
    });
  };
}
