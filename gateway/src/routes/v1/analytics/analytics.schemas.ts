/** JSON schemas of the analytics, metrics, statistics, activity and events routes (SPEC 4.10, 4.11, 2.5). */
import { pageParam, timestamp } from '../../../schemas/common.js';

export const EMAIL_STATUSES = [
  'QUEUED', 'SENT', 'DELIVERED', 'BOUNCED', 'COMPLAINED', 'OPENED', 'CLICKED',
  'DELIVERY_DELAYED', 'REJECTED', 'RENDERING_FAILURE', 'FAILED', 'CANCELLED', 'SUPPRESSED',
] as const;
export type EmailStatusName = (typeof EMAIL_STATUSES)[number];

/** int32 bound of the RPCs' page field. */

const count = { type: 'integer', minimum: 0 } as const;
const rate = { type: 'number', minimum: 0, description: 'percent (0 to 100, not rounded); 0 when the denominator is 0' } as const;

const typeCount = {
  type: 'object',
  required: ['type', 'sent'],
  properties: { type: { type: 'string', description: 'always `email`' }, sent: count },
} as const;

export const analyticsResponse = {
  type: 'object',
  required: ['day', 'month'],
  properties: {
    day: { type: 'array', items: typeCount, description: 'emails sent today (UTC)' },
    month: { type: 'array', items: typeCount, description: 'emails sent this calendar month (UTC)' },
  },
} as const;

export const reputationResponse = {
  type: 'object',
  required: ['delivered', 'hardBounced', 'complained', 'bounceRate', 'complaintRate'],
  properties: {
    delivered: count,
    hardBounced: count,
    complained: count,
    bounceRate: { ...rate, description: 'hardBounced / delivered x 100; 0 when nothing was delivered' },
    complaintRate: { ...rate, description: 'complained / delivered x 100; 0 when nothing was delivered' },
  },
} as const;

const COUNT_FIELDS = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained'] as const;
const countsObject = {
  type: 'object',
  required: [...COUNT_FIELDS],
  properties: Object.fromEntries(COUNT_FIELDS.map((f) => [f, count])),
} as const;

export const timeSeriesResponse = {
  type: 'object',
  required: ['result', 'totalCounts'],
  properties: {
    result: {
      type: 'array',
      description: 'one entry per UTC day, oldest first, ending today; days without email included',
      items: {
        type: 'object',
        required: ['date', ...COUNT_FIELDS],
        properties: { date: { type: 'string', description: 'short day label: `MMM dd`, for example `Nov 21`' }, ...countsObject.properties },
      },
    },
    totalCounts: { ...countsObject, description: 'sums over the days of `result`' },
  },
} as const;

export const metricsResponse = {
  type: 'object',
  required: ['period', 'transactionalEmails', 'marketingEmails', 'totalEmails', 'avgDeliveryRate', 'avgOpenRate', 'avgClickRate', 'domains'],
  properties: {
    period: { type: 'string', enum: ['day', 'week', 'month'] },
    transactionalEmails: { ...count, description: 'emails sent that belong to no campaign' },
    marketingEmails: { ...count, description: 'campaign emails sent' },
    totalEmails: count,
    avgDeliveryRate: { ...rate, description: 'delivered / sent x 100 over the period' },
    avgOpenRate: { ...rate, description: 'opened / delivered x 100 over the period' },
    avgClickRate: { ...rate, description: 'clicked / delivered x 100 over the period' },
    domains: {
      type: 'array',
      description: 'emails sent per domain, most first: every domain of the team, and deleted ones that sent in the period',
      items: { type: 'object', required: ['id', 'name', 'emailsSent'], properties: { id: { type: 'string' }, name: { type: 'string' }, emailsSent: count } },
    },
  },
} as const;

export const STAT_FIELDS = [
  'totalSent', 'totalDelivered', 'totalOpened', 'totalClicked', 'totalBounced', 'totalComplained',
  'deliveryRate', 'openRate', 'clickRate', 'bounceRate', 'complaintRate',
] as const;
const STAT_DESCRIPTIONS: Record<string, string> = {
  deliveryRate: 'delivered / sent x 100', openRate: 'opened / delivered x 100', clickRate: 'clicked / delivered x 100',
  bounceRate: 'bounced / sent x 100', complaintRate: 'complained / delivered x 100',
};
export const statsResponse = {
  type: 'object',
  required: [...STAT_FIELDS],
  properties: Object.fromEntries(STAT_FIELDS.map((f) => [f, f.endsWith('Rate') ? { ...rate, description: `${STAT_DESCRIPTIONS[f]}; 0 when the denominator is 0` } : count])),
} as const;

const eventData = { type: 'object', additionalProperties: true, description: 'free-form: the event payload (SPEC 6.3), with the bounce, open or click details' } as const;

const emailEventProperties = {
  id: { type: 'string', description: 'event id' },
  emailId: { type: 'string' },
  status: { type: 'string', enum: EMAIL_STATUSES },
  data: eventData,
  teamId: { type: 'string' },
  createdAt: timestamp,
} as const;
const EMAIL_EVENT_REQUIRED = ['id', 'emailId', 'status', 'data', 'teamId', 'createdAt'] as const;

/** SPEC 2.5. */
export const emailEvent = { type: 'object', required: [...EMAIL_EVENT_REQUIRED], properties: emailEventProperties } as const;

/** SPEC 2.5: an event plus its email's summary. */
export const activityItem = {
  type: 'object',
  required: [...EMAIL_EVENT_REQUIRED, 'email'],
  properties: {
    ...emailEventProperties,
    email: {
      type: 'object',
      required: ['id', 'to', 'subject', 'from'],
      properties: { id: { type: 'string' }, to: { type: 'array', items: { type: 'string' } }, subject: { type: 'string' }, from: { type: 'string' } },
    },
  },
} as const;

export const pageQuery = {
  page: pageParam,
  limit: { type: 'integer', minimum: 1, maximum: 100, default: 50 },
} as const;
