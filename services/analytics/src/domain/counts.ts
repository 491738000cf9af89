/** The counters a rollup keeps; each counts emails (an email at most once per counter). */
export const METRICS = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'hardBounced', 'complained'] as const;
export type Metric = (typeof METRICS)[number];

export type Counts = Record<Metric, number>;

export const EMAIL_KINDS = ['transactional', 'campaign'] as const;
export type EmailKind = (typeof EMAIL_KINDS)[number];

export function zeroCounts(): Counts {
  return { sent: 0, delivered: 0, opened: 0, clicked: 0, bounced: 0, hardBounced: 0, complained: 0 };
}

/** Counts from a stored or aggregated document: a missing or non-numeric field is 0. */
export function countsFrom(doc: Readonly<Record<string, unknown>> | undefined | null): Counts {
  const c = zeroCounts();
  if (!doc) return c;
  for (const m of METRICS) {
    const v = doc[m];
    c[m] = typeof v === 'number' && Number.isFinite(v) ? v : 0;
  }
  return c;
}

export function addCounts(a: Counts, b: Counts): Counts {
  const c = zeroCounts();
  for (const m of METRICS) c[m] = a[m] + b[m];
  return c;
}

export function sumCounts(all: Iterable<Counts>): Counts {
  let total = zeroCounts();
  for (const c of all) total = addCounts(total, c);
  return total;
}

/** part / whole x 100; 0 when whole is 0 (never NaN or Infinity). Not rounded. */
export function percent(part: number, whole: number): number {
  return whole > 0 ? (part / whole) * 100 : 0;
}

/** The SPEC 4.10 statistics object. */
export interface Stats {
  readonly totalSent: number;
  readonly totalDelivered: number;
  readonly totalOpened: number;
  readonly totalClicked: number;
  readonly totalBounced: number;
  readonly totalComplained: number;
  /** delivered / sent */
  readonly deliveryRate: number;
  /** opened / delivered */
  readonly openRate: number;
  /** clicked / delivered */
  readonly clickRate: number;
  /** bounced / sent */
  readonly bounceRate: number;
  /** complained / delivered */
  readonly complaintRate: number;
}

export function statsOf(c: Counts): Stats {
  return {
    totalSent: c.sent,
    totalDelivered: c.delivered,
    totalOpened: c.opened,
    totalClicked: c.clicked,
    totalBounced: c.bounced,
    totalComplained: c.complained,
    deliveryRate: percent(c.delivered, c.sent),
    openRate: percent(c.opened, c.delivered),
    clickRate: percent(c.clicked, c.delivered),
    bounceRate: percent(c.bounced, c.sent),
    complaintRate: percent(c.complained, c.delivered),
  };
}

/** Reputation (SPEC 4.10): hard bounces and complaints per delivered email. */
export interface Reputation {
  readonly delivered: number;
  readonly hardBounced: number;
  readonly complained: number;
  readonly bounceRate: number;
  readonly complaintRate: number;
}

export function reputationOf(c: Counts): Reputation {
  return {
    delivered: c.delivered,
    hardBounced: c.hardBounced,
    complained: c.complained,
    bounceRate: percent(c.hardBounced, c.delivered),
    complaintRate: percent(c.complained, c.delivered),
  };
}
