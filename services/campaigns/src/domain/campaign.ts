import { addressEntryProblem } from '@mailfleet/kit';

export const CAMPAIGN_STATUSES = ['DRAFT', 'SCHEDULED', 'SENDING', 'PAUSED', 'COMPLETED'] as const;
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];

export const COUNTERS = ['sent', 'delivered', 'opened', 'clicked', 'unsubscribed', 'bounced', 'hardBounced', 'complained'] as const;
export type CounterName = (typeof COUNTERS)[number];
export type Counters = Readonly<Record<CounterName, number>>;

export const BATCH_SIZE_MIN = 1;
export const BATCH_SIZE_MAX = 100_000;
export const DEFAULT_BATCH_SIZE = 100;
export const DEFAULT_BATCH_WINDOW_MINUTES = 5;
export const BATCH_WINDOW_MAX_MINUTES = 10_080;

export const UNSUBSCRIBE_PLACEHOLDER = '{{service_unsubscribe_url}}';
const UNSUBSCRIBE_PLACEHOLDER_RE = /\{\{\s*service_unsubscribe_url\s*\}\}/;

/** A campaign as the service sees it (no storage details). */
export interface Campaign extends Counters {
  readonly id: string;
  readonly teamId: string;
  readonly name: string;
  readonly from: string;
  readonly subject: string;
  readonly previewText: string | null;
  readonly contactBookId: string | null;
  readonly html: string | null;
  readonly content: string | null;
  readonly status: CampaignStatus;
  readonly scheduledAt: Date | null;
  readonly batchSize: number;
  readonly batchWindowMinutes: number;
  readonly total: number;
  readonly replyTo: readonly string[];
  readonly cc: readonly string[];
  readonly bcc: readonly string[];
  /** Why the sender paused the campaign (a permanent upstream refusal); null when not paused by the sender. */
  readonly pausedReason: string | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** Whether a body holds the unsubscribe placeholder (spaces inside the braces tolerated). */
export function hasUnsubscribePlaceholder(text: string | null | undefined): boolean {
  return typeof text === 'string' && UNSUBSCRIBE_PLACEHOLDER_RE.test(text);
}

export interface CampaignInputProblem {
  readonly message: string;
  /** The public field the problem is about, when it is one. */
  readonly field?: string;
}

/** The first problem of a new campaign's fields, or undefined. */
export function checkCampaignInput(i: {
  name: string; from: string; subject: string; contactBookId: string; html?: string | undefined; content?: string | undefined;
  batchSize?: number | undefined; batchWindowMinutes?: number | undefined;
  replyTo?: readonly string[] | undefined; cc?: readonly string[] | undefined; bcc?: readonly string[] | undefined;
}): CampaignInputProblem | undefined {
  if (!i.name.trim()) return { message: 'name is required' };
  if (!i.subject.trim()) return { message: 'subject is required' };
  if (!i.from.trim()) return { message: 'from is required' };
  if (!i.contactBookId.trim()) return { message: 'contactBookId is required' };
  if (!i.html && !i.content) return { message: 'html or content is required' };
  if (!hasUnsubscribePlaceholder(i.html) && !hasUnsubscribePlaceholder(i.content)) {
    return { message: `The campaign content must contain the unsubscribe placeholder ${UNSUBSCRIBE_PLACEHOLDER}` };
  }
  // Checked here rather than when the first chunk is handed over: the emails service refuses the whole
  // chunk for one bad address, and every chunk of the campaign carries the same ones.
  for (const field of ['replyTo', 'cc', 'bcc'] as const) {
    for (const value of i[field] ?? []) {
      const problem = addressEntryProblem(value);
      if (problem) return { message: `${field}: ${problem}`, field };
    }
  }
  return checkBatching(i.batchSize, i.batchWindowMinutes);
}

export function checkBatching(batchSize: number | undefined, windowMinutes: number | undefined): CampaignInputProblem | undefined {
  if (batchSize !== undefined && (!Number.isInteger(batchSize) || batchSize < BATCH_SIZE_MIN || batchSize > BATCH_SIZE_MAX)) {
    return { message: `batchSize must be an integer from ${BATCH_SIZE_MIN} to ${BATCH_SIZE_MAX}` };
  }
  if (windowMinutes !== undefined && (!Number.isInteger(windowMinutes) || windowMinutes < 0 || windowMinutes > BATCH_WINDOW_MAX_MINUTES)) {
    return { message: `batchWindowMinutes must be an integer from 0 to ${BATCH_WINDOW_MAX_MINUTES}` };
  }
  return undefined;
}

/** The domain of a From value (`a@b.c` or `Name <a@b.c>`), lower case; undefined when it is not an address. */
export function senderDomain(from: string): string | undefined {
  const m = /<([^<>]+)>\s*$/.exec(from);
  const addr = (m?.[1] ?? from).trim();
  const at = addr.lastIndexOf('@');
  if (at <= 0 || at === addr.length - 1 || /\s/.test(addr)) return undefined;
  return addr.slice(at + 1).toLowerCase();
}

/** Statuses a transition may start from. */
export const PAUSABLE: readonly CampaignStatus[] = ['SENDING', 'SCHEDULED'];
export const RESUMABLE: readonly CampaignStatus[] = ['PAUSED'];
export const SCHEDULABLE: readonly CampaignStatus[] = ['DRAFT', 'SCHEDULED', 'PAUSED'];

/**
 * What a resume leads to: a campaign paused before its scheduled time goes back to waiting for it
 * (SCHEDULED); one whose time has come (it was sending, or its time passed while paused) sends.
 */
export function resumedStatus(scheduledAt: Date | null, now: Date): CampaignStatus {
  return scheduledAt && scheduledAt.getTime() > now.getTime() ? 'SCHEDULED' : 'SENDING';
}
