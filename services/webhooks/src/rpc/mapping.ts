import { webhooksV1 } from '@mailfleet/proto';
import { maskSecret } from '../domain/secrets.js';
import type { DeliveryState } from '../domain/retry-policy.js';
import type { DeliveryRecord } from '../repositories/deliveries.repository.js';
import type { WebhookRecord, WebhookStatus } from '../repositories/webhooks.repository.js';

const WEBHOOK_STATUS: Record<WebhookStatus, webhooksV1.WebhookStatus> = {
  ACTIVE: webhooksV1.WebhookStatus.WEBHOOK_STATUS_ACTIVE,
  PAUSED: webhooksV1.WebhookStatus.WEBHOOK_STATUS_PAUSED,
  FAILED: webhooksV1.WebhookStatus.WEBHOOK_STATUS_FAILED,
};

const DELIVERY_STATUS: Record<DeliveryState, webhooksV1.DeliveryStatus> = {
  PENDING: webhooksV1.DeliveryStatus.DELIVERY_STATUS_PENDING,
  SUCCESS: webhooksV1.DeliveryStatus.DELIVERY_STATUS_SUCCESS,
  FAILED: webhooksV1.DeliveryStatus.DELIVERY_STATUS_FAILED,
};

export function deliveryStatusFromProto(s: webhooksV1.DeliveryStatus): DeliveryState | undefined {
  return (Object.entries(DELIVERY_STATUS) as [DeliveryState, webhooksV1.DeliveryStatus][]).find(([, v]) => v === s)?.[0];
}

/** The webhook as the API shows it; the secret in full only when `revealSecret` (create, and a change that set a new one). */
export function webhookToProto(w: WebhookRecord, opts: { revealSecret: boolean }): webhooksV1.Webhook {
  return {
    id: w.id,
    url: w.url,
    description: w.description ?? undefined,
    eventTypes: [...w.eventTypes],
    status: WEBHOOK_STATUS[w.status],
    secret: opts.revealSecret ? w.secret : maskSecret(w.secret),
    apiVersion: w.apiVersion ?? undefined,
    consecutiveFailures: w.consecutiveFailures,
    lastSuccessAt: w.lastSuccessAt ?? undefined,
    lastFailureAt: w.lastFailureAt ?? undefined,
    createdAt: w.createdAt,
    updatedAt: w.updatedAt,
    teamId: w.teamId,
    createdByUserId: w.createdByUserId,
  };
}

export function deliveryToProto(d: DeliveryRecord): webhooksV1.WebhookDelivery {
  return {
    id: d.id,
    type: d.type,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    teamId: d.teamId,
    status: DELIVERY_STATUS[d.status],
    webhookId: d.webhookId,
    payload: d.payload,
    attempt: d.attempt,
    nextAttemptAt: d.nextAttemptAt ?? undefined,
    lastError: d.lastError ?? undefined,
    responseStatus: d.responseStatus ?? undefined,
    responseTimeMs: d.responseTimeMs ?? undefined,
    responseText: d.responseText ?? undefined,
    eventId: d.eventId,
  };
}
