import { status } from '@grpc/grpc-js';
import { canonicalAddress, createGrpcClient, isServiceError, type Logger, type ServiceMetrics, type UpstreamClient } from '@mailfleet/kit';
import { authV1, domainsV1, suppressionsV1 } from '@mailfleet/proto';

/** What signing and tracking need from the domains service. */
export interface SendingIdentity {
  readonly domainId: string;
  readonly domainName: string;
  readonly dkimSelector: string;
  /** PKCS#8 PEM. Secret: never logged. */
  readonly dkimPrivateKeyPem: string;
  readonly clickTracking: boolean;
  readonly openTracking: boolean;
}

export type IdentityLookup =
  | { readonly kind: 'verified'; readonly identity: SendingIdentity }
  /** The team has the domain but it is not verified (yet, or any more). */
  | { readonly kind: 'unverified'; readonly domainId?: string | undefined }
  | { readonly kind: 'unknown' };

export interface IdentitySource {
  lookup(teamId: string, domainName: string): Promise<IdentityLookup>;
}

export interface SuppressionChecker {
  /** The given addresses (lower case) that must not be emailed. */
  suppressed(teamId: string, addresses: readonly string[]): Promise<Set<string>>;
}

export type QuotaVerdict = { readonly allowed: true } | { readonly allowed: false; readonly quota: 'daily' | 'monthly'; readonly limit: number };

export interface QuotaGate {
  consume(teamId: string, count: number): Promise<QuotaVerdict>;
}

/** auth.Admit's quota part: reserves between min and max emails, or none. */
export type QuotaReserve = (teamId: string, min: number, max: number) => Promise<{
  readonly granted: number;
  /** UTC day the reservation counts against. */
  readonly day: string;
  readonly dailyLimit: number;
  readonly dailyRemaining: number;
  readonly monthlyLimit: number;
}>;

/** auth.ReleaseQuota: gives unused reserved emails back to their day (and month). */
export type QuotaRelease = (teamId: string, day: string, count: number) => Promise<void>;

export interface BlockQuotaGate extends QuotaGate {
  /** Gives back every unused reservation (at shutdown). */
  releaseAll(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The plan quota reserved from auth in blocks: a send that finds enough units
 * reserved here takes them with no call to auth; otherwise it asks for what it
 * lacks plus a block for the next ones (auth caps the block at a tenth of the
 * team's limits, so a small quota is reserved one send at a time and stays
 * exact). Replicas together never send more than the quota: every unit is
 * taken from auth's shared counters before it is used. What a replica holds
 * unused when it is killed is lost for that day (and month); a block left
 * from an earlier day and everything held at shutdown are given back.
 */
export function createBlockQuotaGate(opts: {
  reserve: QuotaReserve;
  release: QuotaRelease;
  logger: Logger;
  /** Emails reserved beyond what a send needs; default 100. */
  block?: number;
  /** How often blocks left from an earlier day are given back. */
  sweepIntervalMs?: number;
  now?: () => Date;
}): BlockQuotaGate {
  const block = opts.block ?? 100;
  const now = opts.now ?? (() => new Date());
  const held = new Map<string, { day: string; available: number }>();
  const reserving = new Map<string, Promise<void>>();
  const today = () => now().toISOString().slice(0, 10);

  async function giveBack(teamId: string, day: string, count: number): Promise<void> {
    if (count < 1) return;
    try {
      await opts.release(teamId, day, count);
    } catch (err) {
      opts.logger.warn({ err, teamId, day, count }, 'could not give unused quota back to auth; it stays used for that day');
    }
  }

  /** Drops (and gives back) reservations of an earlier day. */
  function dropStale(teamId: string, day: string): Promise<void> {
    const h = held.get(teamId);
    if (!h || h.day === day) return Promise.resolve();
    held.delete(teamId);
    return giveBack(teamId, h.day, h.available);
  }

  /** Uses what is held and asks auth for the rest and a block; puts the held units back if auth refuses. */
  async function reserveFor(teamId: string, count: number): Promise<QuotaVerdict> {
    const h = held.get(teamId);
    const have = h?.available ?? 0;
    if (h) h.available = 0;
    const need = count - have;
    let r: Awaited<ReturnType<QuotaReserve>>;
    try {
      r = await opts.reserve(teamId, need, need + block);
    } catch (err) {
      const back = held.get(teamId);
      if (back && back.day === h?.day) back.available += have;
      throw err;
    }
    const cur = held.get(teamId);
    if (r.granted < need) {
      if (cur && have > 0 && cur.day === h?.day) cur.available += have;
      const daily = r.dailyRemaining < need;
      return { allowed: false, quota: daily ? 'daily' : 'monthly', limit: daily ? r.dailyLimit : r.monthlyLimit };
    }
    const extra = r.granted - need;
    if (cur && cur.day === r.day) cur.available += extra;
    else {
      if (cur) void giveBack(teamId, cur.day, cur.available);
      held.set(teamId, { day: r.day, available: extra });
    }
    return { allowed: true };
  }

  const sweeper = setInterval(() => {
    const day = today();
    void Promise.all([...held.keys()].map((teamId) => dropStale(teamId, day)));
  }, opts.sweepIntervalMs ?? 60_000);
  sweeper.unref();

  return {
    async consume(teamId, count) {
      void dropStale(teamId, today());
      // Sends that find the block used up while a reservation is on its way wait for it rather than each
      // reserving a block of their own (one call to auth per block, not per concurrent send).
      for (;;) {
        const h = held.get(teamId);
        if (h && h.available >= count) {
          h.available -= count;
          return { allowed: true };
        }
        const flight = reserving.get(teamId);
        if (!flight) break;
        await flight;
      }
      let done!: () => void;
      reserving.set(teamId, new Promise<void>((resolve) => { done = resolve; }));
      try {
        return await reserveFor(teamId, count);
      } finally {
        reserving.delete(teamId);
        done();
      }
    },
    async releaseAll() {
      const all = [...held];
      held.clear();
      await Promise.all(all.map(([teamId, h]) => giveBack(teamId, h.day, h.available)));
    },
    async stop() {
      clearInterval(sweeper);
      await this.releaseAll();
    },
  };
}

export interface Upstreams {
  readonly identities: IdentitySource;
  readonly suppressions: SuppressionChecker;
  readonly quota: QuotaGate;
  /** Gives unused reserved quota back to auth, then closes every channel. */
  close(): Promise<void>;
}

/** gRPC clients of domains, suppressions and auth, each with its deadline and breaker. */
export function createUpstreams(opts: {
  authAddr: string;
  domainsAddr: string;
  suppressionsAddr: string;
  deadlineMs: number;
  logger: Logger;
  metrics?: ServiceMetrics;
  /** Emails of plan quota reserved from auth beyond what a send needs (createBlockQuotaGate). */
  quotaBlock?: number;
}): Upstreams {
  const common = { logger: opts.logger, metrics: opts.metrics, deadlineMs: opts.deadlineMs };
  const domains: UpstreamClient<domainsV1.DomainsServiceClient> = createGrpcClient({ ...common, name: 'domains', address: opts.domainsAddr, ctor: domainsV1.DomainsServiceClient });
  const suppressions: UpstreamClient<suppressionsV1.SuppressionsServiceClient> = createGrpcClient({
    ...common, name: 'suppressions', address: opts.suppressionsAddr, ctor: suppressionsV1.SuppressionsServiceClient,
  });
  const auth: UpstreamClient<authV1.AuthServiceClient> = createGrpcClient({ ...common, name: 'auth', address: opts.authAddr, ctor: authV1.AuthServiceClient });
  const quota = createBlockQuotaGate({
    logger: opts.logger,
    block: opts.quotaBlock,
    async reserve(teamId, min, max) {
      const r = await auth.call.admit({ token: '', teamId, quotaMin: min, quotaMax: max });
      return { granted: r.quotaAllowed ? r.quotaGranted : 0, day: r.quotaDay, dailyLimit: r.dailyLimit, dailyRemaining: r.dailyRemaining, monthlyLimit: r.monthlyLimit };
    },
    async release(teamId, day, count) {
      await auth.call.releaseQuota({ teamId, day, count });
    },
  });

  return {
    identities: {
      async lookup(teamId, domainName) {
        try {
          const r = await domains.call.getSendingIdentity({ teamId, domainName });
          if (r.status !== domainsV1.DomainStatus.DOMAIN_STATUS_SUCCESS) return { kind: 'unverified', domainId: r.domainId || undefined };
          return {
            kind: 'verified',
            identity: {
              domainId: r.domainId, domainName: r.domainName.toLowerCase(), dkimSelector: r.dkimSelector, dkimPrivateKeyPem: r.dkimPrivateKeyPem,
              clickTracking: r.clickTracking, openTracking: r.openTracking,
            },
          };
        } catch (err) {
          if (isServiceError(err) && err.code === status.NOT_FOUND) return { kind: 'unknown' };
          if (isServiceError(err) && err.code === status.FAILED_PRECONDITION) return { kind: 'unverified' };
          throw err;
        }
      },
    },
    suppressions: {
      async suppressed(teamId, addresses) {
        if (addresses.length === 0) return new Set();
        const out = new Set<string>();
        for (let i = 0; i < addresses.length; i += 1000) {
          const r = await suppressions.call.checkSuppressed({ teamId, emails: addresses.slice(i, i + 1000) });
          for (const e of r.suppressedEmails) out.add(canonicalAddress(e));
        }
        return out;
      },
    },
    quota,
    async close() {
      domains.close();
      suppressions.close();
      // Unused reserved quota goes back to auth before its channel closes.
      await quota.stop().finally(() => auth.close());
    },
  };
}
