import {
  ConflictError, FailedPreconditionError, InvalidArgumentError, newEventId, newId, NotFoundError, type CallContext, type UnaryHandlers,
} from '@mailfleet/kit';
import type { webhooksV1 } from '@mailfleet/proto';
import type { EndpointClient } from '../clients/endpoint.client.js';
import { TEST_EVENT_TYPE, validateEventTypes } from '../domain/event-types.js';
import { serializePayload, testEnvelope } from '../domain/payload.js';
import { generateSecret, validateSecret } from '../domain/secrets.js';
import { deliveryHeaders } from '../domain/signature.js';
import { parseWebhookUrl } from '../domain/urls.js';
import type { DeliveriesRepository } from '../repositories/deliveries.repository.js';
import type { WebhookPatch, WebhookRecord, WebhooksRepository } from '../repositories/webhooks.repository.js';
import type { Deliverer } from '../workers/deliverer.js';
import { deliveryStatusFromProto, deliveryToProto, webhookToProto } from './mapping.js';

export interface WebhooksRpcDeps {
  readonly webhooks: WebhooksRepository;
  readonly deliveries: DeliveriesRepository;
  readonly endpoint: EndpointClient;
  readonly deliverer: Deliverer;
  /** Time limit of one attempt (the synchronous ones also stay within the caller's deadline). */
  readonly timeoutMs: number;
  /** Lease of a manual retry's claim. */
  readonly leaseMs: number;
  readonly now?: () => Date;
}

const MAX_DESCRIPTION = 1_000;
const DEFAULT_PAGE_SIZE = 20;
const MAX_PAGE_SIZE = 100;

function requireId(value: string, field: string): string {
  if (!value) throw new InvalidArgumentError(`${field} is required`);
  return value;
}

function checkDescription(d: string): string {
  if (d.length > MAX_DESCRIPTION) throw new InvalidArgumentError(`description must be at most ${MAX_DESCRIPTION} characters`);
  return d;
}

/** A synchronous attempt answers before the caller's deadline, with a little room for the reply. */
function attemptTimeout(ctx: CallContext | undefined, configured: number): number {
  const remaining = ctx?.remainingMs() ?? Infinity;
  return Math.max(100, Math.min(configured, remaining - 500));
}

export function createWebhooksHandlers(deps: WebhooksRpcDeps): UnaryHandlers<webhooksV1.WebhooksServiceServer> {
  const now = deps.now ?? (() => new Date());

  async function webhookOf(teamId: string, webhookId: string): Promise<WebhookRecord> {
    const w = await deps.webhooks.get(requireId(teamId, 'team_id'), requireId(webhookId, 'webhook_id'));
    if (!w) throw new NotFoundError('Webhook not found');
    return w;
  }

  async function vettedUrl(raw: string): Promise<string> {
    const target = parseWebhookUrl(raw);
    await deps.endpoint.vet(target);
    return target.url;
  }

  return {
    async createWebhook(req) {
      const teamId = requireId(req.teamId, 'team_id');
      const eventTypes = validateEventTypes(req.eventTypes);
      const secret = req.secret === undefined ? generateSecret() : validateSecret(req.secret);
      const description = req.description === undefined ? null : checkDescription(req.description);
      const url = await vettedUrl(req.url);
      const created = await deps.webhooks.create({
        id: newId('wh'), teamId, url, description, eventTypes, secret, createdAt: now(), createdByUserId: req.createdByUserId,
      });
      return { webhook: webhookToProto(created, { revealSecret: true }) };
    },

    async listWebhooks(req) {
      const list = await deps.webhooks.list(requireId(req.teamId, 'team_id'));
      return { webhooks: list.map((w) => webhookToProto(w, { revealSecret: false })) };
    },

    async getWebhook(req) {
      return { webhook: webhookToProto(await webhookOf(req.teamId, req.webhookId), { revealSecret: false }) };
    },

    async updateWebhook(req) {
      const current = await webhookOf(req.teamId, req.webhookId);
      if (req.rotateSecret && req.secret !== undefined) throw new InvalidArgumentError('Give either secret or rotateSecret, not both');
      const patch: { -readonly [K in keyof WebhookPatch]: WebhookPatch[K] } = {};
      if (req.eventTypes !== undefined) patch.eventTypes = validateEventTypes(req.eventTypes.values);
      if (req.clearDescription) patch.description = null;
      else if (req.description !== undefined) patch.description = checkDescription(req.description);
      if (req.secret !== undefined) patch.secret = validateSecret(req.secret);
      else if (req.rotateSecret) patch.secret = generateSecret();
      if (req.active === false) patch.status = 'PAUSED';
      if (req.active === true) {
        patch.status = 'ACTIVE';
        patch.resetFailures = true;
      }
      if (req.url !== undefined) patch.url = await vettedUrl(req.url);
      if (Object.keys(patch).length === 0) return { webhook: webhookToProto(current, { revealSecret: false }) };

      const updated = await deps.webhooks.update(current.teamId, current.id, patch, now());
      if (!updated) throw new NotFoundError('Webhook not found');
      // Deliveries held while it was paused or failed go out again.
      if (req.active === true) await deps.deliveries.unpark(updated.id);
      return { webhook: webhookToProto(updated, { revealSecret: patch.secret !== undefined }) };
    },

    async deleteWebhook(req) {
      const deleted = await deps.webhooks.delete(requireId(req.teamId, 'team_id'), requireId(req.webhookId, 'webhook_id'));
      if (!deleted) throw new NotFoundError('Webhook not found');
      // A crash before this leaves pending deliveries whose next claim finds the webhook gone and cancels them.
      await deps.deliveries.cancelPending(deleted.id, 'cancelled: webhook deleted', now());
      return { webhook: webhookToProto(deleted, { revealSecret: false }) };
    },

    async testWebhook(req, ctx) {
      const webhook = await webhookOf(req.teamId, req.webhookId);
      const startedAt = now();
      const envelope = testEnvelope(newEventId(), startedAt);
      const payload = serializePayload(envelope);
      const result = await deps.endpoint.post(
        parseWebhookUrl(webhook.url), payload, deliveryHeaders(webhook.secret, payload, envelope), { timeoutMs: attemptTimeout(ctx, deps.timeoutMs) },
      );
      // Stored once the outcome is known: a test is never retried, and a crash mid-test leaves nothing half done.
      const record = await deps.deliveries.insertFinished({
        teamId: webhook.teamId, webhookId: webhook.id, eventId: envelope.id, type: TEST_EVENT_TYPE, payload,
        status: result.ok ? 'SUCCESS' : 'FAILED', attempt: 1, nextAttemptAt: null, lastError: result.ok ? null : (result.error ?? 'failed'),
        responseStatus: result.status ?? null, responseTimeMs: result.durationMs, responseText: result.responseText ?? null,
        createdAt: startedAt, updatedAt: now(),
      });
      return { delivery: deliveryToProto(record) };
    },

    async listWebhookDeliveries(req) {
      const webhook = await webhookOf(req.teamId, req.webhookId);
      const page = req.page === 0 ? 1 : req.page;
      const limit = req.limit === 0 ? DEFAULT_PAGE_SIZE : req.limit;
      if (page < 1) throw new InvalidArgumentError('page must be at least 1');
      if (limit < 1 || limit > MAX_PAGE_SIZE) throw new InvalidArgumentError(`limit must be between 1 and ${MAX_PAGE_SIZE}`);
      const status = req.status ? deliveryStatusFromProto(req.status) : undefined;
      if (req.status && !status) throw new InvalidArgumentError('Unknown delivery status');
      const { records, count } = await deps.deliveries.list(webhook.teamId, webhook.id, { skip: (page - 1) * limit, limit, status });
      return { deliveries: records.map(deliveryToProto), count };
    },

    async retryWebhookDelivery(req, ctx) {
      const webhook = await webhookOf(req.teamId, req.webhookId);
      const deliveryId = requireId(req.deliveryId, 'delivery_id');
      if (webhook.status !== 'ACTIVE') {
        throw new FailedPreconditionError(`Webhook is ${webhook.status}; activate it (PATCH with active: true) before retrying deliveries`);
      }
      const timeoutMs = attemptTimeout(ctx, deps.timeoutMs);
      const claim = await deps.deliveries.claimForRetry(webhook.teamId, webhook.id, deliveryId, now(), Math.max(deps.leaseMs, timeoutMs + 5_000));
      if (claim === undefined) throw new NotFoundError('Delivery not found');
      if (claim === 'busy') throw new ConflictError('The delivery is being attempted right now; try again in a moment');
      const after = await deps.deliverer.attempt(claim, { timeoutMs });
      const record = after ?? (await deps.deliveries.get(webhook.teamId, webhook.id, deliveryId));
      if (!record) throw new NotFoundError('Delivery not found');
      return { delivery: deliveryToProto(record) };
    },
  };
}
