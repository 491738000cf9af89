import { status } from '@grpc/grpc-js';
import { createGrpcClient, isServiceError, type Logger, type ServiceMetrics, type UpstreamClient } from '@mailfleet/kit';
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

export interface Upstreams {
  readonly identities: IdentitySource;
  readonly suppressions: SuppressionChecker;
  readonly quota: QuotaGate;
  close(): void;
}

/** gRPC clients of domains, suppressions and auth, each with its deadline and breaker. */
export function createUpstreams(opts: {
  authAddr: string;
  domainsAddr: string;
  suppressionsAddr: string;
  deadlineMs: number;
  logger: Logger;
  metrics?: ServiceMetrics;
}): Upstreams {
  const common = { logger: opts.logger, metrics: opts.metrics, deadlineMs: opts.deadlineMs };
  const domains: UpstreamClient<domainsV1.DomainsServiceClient> = createGrpcClient({ ...common, name: 'domains', address: opts.domainsAddr, ctor: domainsV1.DomainsServiceClient });
  const suppressions: UpstreamClient<suppressionsV1.SuppressionsServiceClient> = createGrpcClient({
    ...common, name: 'suppressions', address: opts.suppressionsAddr, ctor: suppressionsV1.SuppressionsServiceClient,
  });
  const auth: UpstreamClient<authV1.AuthServiceClient> = createGrpcClient({ ...common, name: 'auth', address: opts.authAddr, ctor: authV1.AuthServiceClient });

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
          for (const e of r.suppressedEmails) out.add(e.trim().toLowerCase());
        }
        return out;
      },
    },
    quota: {
      async consume(teamId, count) {
        const r = await auth.call.consumeQuota({ teamId, count });
        if (r.allowed) return { allowed: true };
        const daily = r.dailyRemaining < count;
        return { allowed: false, quota: daily ? 'daily' : 'monthly', limit: daily ? r.dailyLimit : r.monthlyLimit };
      },
    },
    close() {
      domains.close();
      suppressions.close();
      auth.close();
    },
  };
}
