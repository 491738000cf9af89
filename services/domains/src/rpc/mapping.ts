import { domainsV1 } from '@mailfleet/proto';
import type { DomainStatus } from '../domain/verification.js';
import type { DomainRecord } from '../repositories/domains.repository.js';

const STATUS: Record<DomainStatus, domainsV1.DomainStatus> = {
  NOT_STARTED: domainsV1.DomainStatus.DOMAIN_STATUS_NOT_STARTED,
  PENDING: domainsV1.DomainStatus.DOMAIN_STATUS_PENDING,
  SUCCESS: domainsV1.DomainStatus.DOMAIN_STATUS_SUCCESS,
  FAILED: domainsV1.DomainStatus.DOMAIN_STATUS_FAILED,
  TEMPORARY_FAILURE: domainsV1.DomainStatus.DOMAIN_STATUS_TEMPORARY_FAILURE,
};

export function statusToProto(s: DomainStatus): domainsV1.DomainStatus {
  return STATUS[s];
}

export function domainToProto(d: DomainRecord): domainsV1.Domain {
  return {
    id: d.id,
    name: d.name,
    teamId: d.teamId,
    status: statusToProto(d.status),
    region: d.region,
    clickTracking: d.clickTracking,
    openTracking: d.openTracking,
    publicKey: d.publicKey,
    dkimStatus: d.dkimStatus ?? undefined,
    spfDetails: d.spfDetails ?? undefined,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    dmarcAdded: d.dmarcAdded,
    isVerifying: d.isVerifying,
    errorMessage: d.errorMessage ?? undefined,
    subdomain: d.subdomain ?? undefined,
    verificationError: d.verificationError ?? undefined,
    lastCheckedTime: d.lastCheckedTime ?? undefined,
    dnsRecords: d.records.map((r) => ({
      type: r.type,
      name: r.name,
      value: r.value,
      ttl: 'Auto',
      priority: r.priority === null ? undefined : String(r.priority),
      status: r.status,
      recommended: r.recommended,
    })),
  };
}
