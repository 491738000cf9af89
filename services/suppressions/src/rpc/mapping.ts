import { suppressionsV1 } from '@mailfleet/proto';
import type { SuppressionReason } from '../domain/suppressions.js';
import type { SuppressionRecord } from '../repositories/suppressions.repository.js';

const REASONS: Record<SuppressionReason, suppressionsV1.SuppressionReason> = {
  HARD_BOUNCE: suppressionsV1.SuppressionReason.SUPPRESSION_REASON_HARD_BOUNCE,
  COMPLAINT: suppressionsV1.SuppressionReason.SUPPRESSION_REASON_COMPLAINT,
  MANUAL: suppressionsV1.SuppressionReason.SUPPRESSION_REASON_MANUAL,
  UNSUBSCRIBE: suppressionsV1.SuppressionReason.SUPPRESSION_REASON_UNSUBSCRIBE,
};

export function reasonToProto(r: SuppressionReason): suppressionsV1.SuppressionReason {
  return REASONS[r];
}

/** The reason of a proto value; undefined for UNSPECIFIED and unknown numbers. */
export function reasonFromProto(r: suppressionsV1.SuppressionReason): SuppressionReason | undefined {
  return (Object.entries(REASONS) as [SuppressionReason, suppressionsV1.SuppressionReason][]).find(([, v]) => v === r)?.[0];
}

export function suppressionToProto(s: SuppressionRecord): suppressionsV1.Suppression {
  return { id: s.id, teamId: s.teamId, email: s.email, reason: reasonToProto(s.reason), source: s.source, createdAt: s.createdAt };
}
