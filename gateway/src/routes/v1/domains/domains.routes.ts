import { analyticsV1, domainsV1 } from '@mailfleet/proto';
import type { FastifyInstance } from 'fastify';
import type { Upstreams } from '../../../clients/upstreams.js';
import { principalOf, type Principal } from '../../../plugins/auth.plugin.js';
import { GatewayError } from '../../../plugins/errors.plugin.js';
import { idParam, iso, nullableString, nullableTimestamp, timestamp } from '../../../schemas/common.js';

const TAGS = ['Domains'];
/** SPEC 7: domain endpoints answer errors as `{error: message}`. */
const config = { errorForm: 'string' as const };

const NOT_FOUND = 'Domain not found';
const NO_ACCESS = 'API key has no access to this domain';

const dnsRecord = {
  type: 'object',
  required: ['type', 'name', 'value', 'ttl', 'priority', 'status', 'recommended'],
  properties: {
    type: { type: 'string', enum: ['MX', 'TXT'] },
    name: { type: 'string', description: 'host name of the record' },
    value: { type: 'string' },
    ttl: { type: 'string', description: 'usually `Auto`' },
    priority: { ...nullableString, description: 'MX preference; null for TXT' },
    status: { type: 'string', description: 'what the last lookup found: NOT_STARTED, PENDING, SUCCESS, FAILED or TEMPORARY_FAILURE' },
    recommended: { type: 'boolean', description: 'recommended rather than required for verification (MX, DMARC)' },
  },
} as const;

const domainSchema = {
  type: 'object',
  required: [
    'id', 'name', 'teamId', 'status', 'region', 'clickTracking', 'openTracking', 'publicKey', 'dkimStatus', 'spfDetails', 'createdAt',
    'updatedAt', 'dmarcAdded', 'isVerifying', 'errorMessage', 'subdomain', 'verificationError', 'lastCheckedTime', 'dnsRecords',
  ],
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    teamId: { type: 'string' },
    status: { type: 'string', enum: ['NOT_STARTED', 'PENDING', 'SUCCESS', 'FAILED', 'TEMPORARY_FAILURE'] },
    region: { type: 'string' },
    clickTracking: { type: 'boolean' },
    openTracking: { type: 'boolean' },
    publicKey: { type: 'string', description: 'DKIM public key (base64 DER)' },
    dkimStatus: { ...nullableString, description: 'Pending, Success, Failed or TemporaryFailure; null until verification starts' },
    spfDetails: { ...nullableString, description: 'SPF check: Pending, Success, Failed or TemporaryFailure; null until verification starts' },
    createdAt: timestamp,
    updatedAt: timestamp,
    dmarcAdded: { type: 'boolean' },
    isVerifying: { type: 'boolean', description: 'the service will check the records again on its own (PENDING or TEMPORARY_FAILURE)' },
    errorMessage: { ...nullableString, description: 'why verification failed, naming the record' },
    subdomain: nullableString,
    verificationError: { ...nullableString, description: 'every problem the last check found' },
    lastCheckedTime: nullableTimestamp,
    dnsRecords: { type: 'array', items: dnsRecord },
  },
} as const;

const errorResponse = { type: 'object', required: ['error'], properties: { error: { type: 'string' } } } as const;
const errors = { 400: errorResponse, 403: errorResponse, 404: errorResponse } as const;

const analyticsResponse = {
  type: 'object',
  required: ['period', 'totalSent', 'totalDelivered', 'totalOpened', 'totalClicked', 'deliveryRate', 'openRate', 'clickRate'],
  properties: {
    period: { type: 'string', enum: ['day', 'week', 'month'] },
    totalSent: { type: 'number' },
    totalDelivered: { type: 'number' },
    totalOpened: { type: 'number' },
    totalClicked: { type: 'number' },
    deliveryRate: { type: 'number', description: 'percent' },
    openRate: { type: 'number', description: 'percent' },
    clickRate: { type: 'number', description: 'percent' },
  },
} as const;

const STAT_FIELDS = [
  'totalSent', 'totalDelivered', 'totalOpened', 'totalClicked', 'totalBounced', 'totalComplained',
  'deliveryRate', 'openRate', 'clickRate', 'bounceRate', 'complaintRate',
] as const;
const statsResponse = {
  type: 'object',
  required: [...STAT_FIELDS],
  properties: Object.fromEntries(STAT_FIELDS.map((f) => [f, { type: 'number', ...(f.endsWith('Rate') ? { description: 'percent' } : {}) }])),
} as const;

export function statusName(s: domainsV1.DomainStatus): string {
  return domainsV1.domainStatusToJSON(s).replace(/^DOMAIN_STATUS_/, '');
}

export function toDomain(d: domainsV1.Domain) {
  return {
    id: d.id,
    name: d.name,
    teamId: d.teamId,
    status: statusName(d.status),
    region: d.region,
    clickTracking: d.clickTracking,
    openTracking: d.openTracking,
    publicKey: d.publicKey,
    dkimStatus: d.dkimStatus ?? null,
    spfDetails: d.spfDetails ?? null,
    createdAt: iso(d.createdAt),
    updatedAt: iso(d.updatedAt),
    dmarcAdded: d.dmarcAdded,
    isVerifying: d.isVerifying,
    errorMessage: d.errorMessage ?? null,
    subdomain: d.subdomain ?? null,
    verificationError: d.verificationError ?? null,
    lastCheckedTime: iso(d.lastCheckedTime),
    dnsRecords: d.dnsRecords.map((r) => ({
      type: r.type, name: r.name, value: r.value, ttl: r.ttl, priority: r.priority ?? null, status: r.status, recommended: r.recommended,
    })),
  };
}

/** SPEC 4.3: a domain-restricted key reads another domain as missing (404) ... */
function ensureReadable(p: Principal, id: string): void {
  if (p.domainId && p.domainId !== id) throw new GatewayError(404, NOT_FOUND);
}
/** ... and is refused (403) when it tries to change one. */
function ensureWritable(p: Principal, id: string): void {
  if (p.domainId && p.domainId !== id) throw new GatewayError(403, NO_ACCESS);
}

type PeriodName = 'day' | 'week' | 'month';
const PERIODS: Record<PeriodName, analyticsV1.Period> = {
  day: analyticsV1.Period.PERIOD_DAY, week: analyticsV1.Period.PERIOD_WEEK, month: analyticsV1.Period.PERIOD_MONTH,
};
function periodName(p: analyticsV1.Period, asked: PeriodName): PeriodName {
  return (Object.entries(PERIODS) as [PeriodName, analyticsV1.Period][]).find(([, v]) => v === p)?.[0] ?? asked;
}

const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})?)?$/;
function isoDate(value: string | undefined, field: string): Date | undefined {
  if (value === undefined || value === '') return undefined;
  const d = new Date(value);
  if (!ISO_DATE.test(value) || Number.isNaN(d.getTime())) throw new GatewayError(400, `Invalid ${field}: expected an ISO 8601 date such as 2026-01-31 or 2026-01-31T12:00:00Z`);
  return d;
}

/** SPEC 4.3 domains, plus PATCH for the tracking flags; errors are `{error: string}`. */
export function domainsRoutes(deps: { upstreams: Upstreams }) {
  const { domains, analytics } = deps.upstreams;

  return async (app: FastifyInstance): Promise<void> => {
    async function domainOf(p: Principal, id: string): Promise<domainsV1.Domain> {
      ensureReadable(p, id);
      return (await domains.call.getDomain({ teamId: p.teamId, domainId: id })).domain!;
    }

    app.get('/domains', {
      config,
      schema: {
        tags: TAGS, summary: 'List domains (a domain-restricted key sees only its domain)',
        response: { 200: { type: 'array', items: domainSchema } },
      },
    }, async (req) => {
      const p = principalOf(req);
      const res = await domains.call.listDomains({ teamId: p.teamId, domainId: p.domainId });
      return res.domains.map(toDomain);
    });

    app.get<{ Params: { id: string } }>('/domains/:id', {
      config,
      schema: { tags: TAGS, summary: 'Get a domain with its DNS records', params: idParam, response: { 200: domainSchema, ...errors } },
    }, async (req) => toDomain(await domainOf(principalOf(req), req.params.id)));

    app.post<{ Body: { name: string; region: string } }>('/domains', {
      config,
      schema: {
        tags: TAGS,
        summary: 'Add a domain: returns the DNS records to publish (status NOT_STARTED)',
        body: {
          type: 'object',
          required: ['name', 'region'],
          additionalProperties: false,
          properties: {
            name: { type: 'string', minLength: 1, maxLength: 300, description: 'domain name, for example mail.example.com' },
            region: { type: 'string', description: 'sending region; only us-east-1 is supported' },
          },
        },
        response: { 200: domainSchema, ...errors, 409: errorResponse },
      },
    }, async (req) => {
      const p = principalOf(req);
      if (p.domainId) throw new GatewayError(403, 'A domain-restricted API key cannot add domains');
      // A 2048-bit RSA key pair is generated per domain: allow it more than the default deadline on a busy node.
      const res = await domains.call.createDomain({ teamId: p.teamId, name: req.body.name, region: req.body.region }, { deadlineMs: 30_000 });
      return toDomain(res.domain!);
    });

    app.put<{ Params: { id: string } }>('/domains/:id/verify', {
      config,
      schema: {
        tags: TAGS,
        summary: 'Start DNS verification; it runs asynchronously: poll GET /v1/domains/{id}',
        params: idParam,
        response: { 200: { type: 'object', required: ['message'], properties: { message: { type: 'string' } } }, ...errors },
      },
    }, async (req) => {
      const p = principalOf(req);
      ensureWritable(p, req.params.id);
      return { message: (await domains.call.verifyDomain({ teamId: p.teamId, domainId: req.params.id })).message };
    });

    app.patch<{ Params: { id: string }; Body: { openTracking?: boolean; clickTracking?: boolean } }>('/domains/:id', {
      config,
      schema: {
        tags: TAGS,
        summary: 'Set open and click tracking (mailfleet extension; not in the public specification)',
        description: 'Turns open tracking (a pixel in HTML mail) and click tracking (rewritten links) on or off for mail sent from this domain. '
          + 'Give at least one of the two flags; the other stays as it is. Answers the updated domain.',
        params: idParam,
        body: {
          type: 'object',
          additionalProperties: false,
          minProperties: 1,
          properties: { openTracking: { type: 'boolean' }, clickTracking: { type: 'boolean' } },
        },
        response: { 200: domainSchema, ...errors },
      },
    }, async (req) => {
      const p = principalOf(req);
      ensureWritable(p, req.params.id);
      const res = await domains.call.updateDomain({
        teamId: p.teamId, domainId: req.params.id, openTracking: req.body.openTracking, clickTracking: req.body.clickTracking,
      });
      return toDomain(res.domain!);
    });

    app.delete<{ Params: { id: string } }>('/domains/:id', {
      config,
      schema: {
        tags: TAGS,
        summary: 'Delete a domain permanently; emails scheduled from it fail',
        params: idParam,
        response: {
          200: { type: 'object', required: ['success', 'message'], properties: { success: { type: 'boolean', const: true }, message: { type: 'string' } } },
          ...errors,
        },
      },
    }, async (req) => {
      const p = principalOf(req);
      ensureWritable(p, req.params.id);
      const res = await domains.call.deleteDomain({ teamId: p.teamId, domainId: req.params.id });
      return { success: true, message: res.message };
    });

    app.get<{ Params: { id: string }; Querystring: { period: PeriodName } }>('/domains/:id/analytics', {
      config,
      schema: {
        tags: TAGS,
        summary: 'Counts and rates of mail sent from the domain over a period',
        params: idParam,
        querystring: {
          type: 'object',
          properties: { period: { type: 'string', enum: ['day', 'week', 'month'], default: 'month' } },
        },
        response: { 200: analyticsResponse, ...errors },
      },
    }, async (req) => {
      const p = principalOf(req);
      const d = await domainOf(p, req.params.id);
      const period = req.query.period;
      const r = await analytics.call.getDomainAnalytics({ teamId: p.teamId, domainId: d.id, period: PERIODS[period] });
      return {
        period: periodName(r.period, period), totalSent: r.totalSent, totalDelivered: r.totalDelivered, totalOpened: r.totalOpened,
        totalClicked: r.totalClicked, deliveryRate: r.deliveryRate, openRate: r.openRate, clickRate: r.clickRate,
      };
    });

    app.get<{ Params: { id: string }; Querystring: { startDate?: string; endDate?: string } }>('/domains/:id/stats', {
      config,
      schema: {
        tags: TAGS,
        summary: 'Statistics of mail sent from the domain in a date range',
        params: idParam,
        querystring: {
          type: 'object',
          properties: {
            startDate: { type: 'string', description: 'ISO 8601; no lower bound when absent' },
            endDate: { type: 'string', description: 'ISO 8601; now when absent' },
          },
        },
        response: { 200: statsResponse, ...errors },
      },
    }, async (req) => {
      const p = principalOf(req);
      const startDate = isoDate(req.query.startDate, 'startDate');
      const endDate = isoDate(req.query.endDate, 'endDate');
      if (startDate && endDate && startDate > endDate) throw new GatewayError(400, 'Invalid date range: startDate is after endDate');
      const d = await domainOf(p, req.params.id);
      const { stats } = await analytics.call.getDomainStats({ teamId: p.teamId, domainId: d.id, startDate, endDate });
      return Object.fromEntries(STAT_FIELDS.map((f) => [f, stats?.[f] ?? 0]));
    });
  };
}
