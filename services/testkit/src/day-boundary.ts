const DAY_MS = 86_400_000;

/**
 * Tests whose assertions name UTC days ("today", "3 days ago", the last 7
 * days) are wrong for a run that crosses midnight, or whose back-dated
 * "today" events fall on yesterday just after it. This waits until at least
 * `needMs` are left before the next UTC midnight and at least `afterMs` have
 * passed since the last one (past midnight if need be): at most
 * needMs + afterMs, and only near midnight.
 */
export async function awayFromUtcMidnight(opts: { needMs: number; afterMs: number }, now: () => number = Date.now): Promise<number> {
  const t = now();
  const intoDay = t % DAY_MS;
  const left = DAY_MS - intoDay;
  const wait = intoDay < opts.afterMs ? opts.afterMs - intoDay : left < opts.needMs ? left + opts.afterMs : 0;
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  return wait;
}
