import { randomUUID } from 'node:crypto';
import { createLogger } from '@mailfleet/kit';
import type { EndpointClient } from '../../src/clients/endpoint.client.js';
import type { AttemptResult } from '../../src/domain/retry-policy.js';
import type { WebhookTarget } from '../../src/domain/urls.js';
import type { ClaimedDelivery, DeliveriesRepository, DeliveryRecord } from '../../src/repositories/deliveries.repository.js';
import type { WebhookRecord, WebhooksRepository } from '../../src/repositories/webhooks.repository.js';

export const silentLogger = createLogger({ service: 'webhooks-unit', level: 'silent' });

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** In-memory webhooks with the repository's semantics (team scoping, FAILED at the threshold). */
export function fakeWebhooks(): WebhooksRepository & { rows: Map<string, Mutable<WebhookRecord>> } {
  const rows = new Map<string, Mutable<WebhookRecord>>();
  const of = (teamId: string, id: string) => {
    const w = rows.get(id);
    return w && w.teamId === teamId ? w : undefined;
  };
  return {
    rows,
    async ensureIndexes() {},
    async create(input) {
      const w: Mutable<WebhookRecord> = {
        ...input, eventTypes: [...input.eventTypes], status: 'ACTIVE', apiVersion: null, consecutiveFailures: 0, lastSuccessAt: null,
        lastFailureAt: null, updatedAt: input.createdAt,
      };
      rows.set(w.id, w);
      return { ...w };
    },
    async list(teamId) {
      return [...rows.values()].filter((w) => w.teamId === teamId).reverse().map((w) => ({ ...w }));
    },
    async get(teamId, id) {
      const w = of(teamId, id);
      return w ? { ...w } : undefined;
    },
    async update(teamId, id, patch, now) {
      const w = of(teamId, id);
      if (!w) return undefined;
      if (patch.url !== undefined) w.url = patch.url;
      if (patch.description !== undefined) w.description = patch.description;
      if (patch.eventTypes !== undefined) w.eventTypes = [...patch.eventTypes];
      if (patch.status !== undefined) w.status = patch.status;
      if (patch.resetFailures) w.consecutiveFailures = 0;
      if (patch.secret !== undefined) w.secret = patch.secret;
      w.updatedAt = now;
      return { ...w };
    },
    async delete(teamId, id) {
      const w = of(teamId, id);
      if (!w) return undefined;
      rows.delete(id);
      return { ...w };
    },
    async active(teamId) {
      return [...rows.values()].filter((w) => w.teamId === teamId && w.status === 'ACTIVE').map((w) => ({ ...w }));
    },
    async recordSuccess(teamId, id, at) {
      const w = of(teamId, id);
      if (w) {
        w.consecutiveFailures = 0;
        w.lastSuccessAt = at;
      }
    },
    async recordFailure(teamId, id, at, eventFailed, threshold) {
      const w = of(teamId, id);
      if (!w) return { turnedFailed: false, consecutiveFailures: 0 };
      w.lastFailureAt = at;
      if (eventFailed) w.consecutiveFailures++;
      const turnedFailed = eventFailed && w.consecutiveFailures >= threshold && w.status === 'ACTIVE';
      if (turnedFailed) w.status = 'FAILED';
      return { turnedFailed, consecutiveFailures: w.consecutiveFailures };
    },
  };
}

interface Row extends Mutable<DeliveryRecord> {
  leaseUntil: number;
  leaseToken?: string | undefined;
  parked?: boolean;
}

/** In-memory deliveries with leases, parking and the (webhook, event) uniqueness. */
export function fakeDeliveries(): DeliveriesRepository & { rows: Map<string, Row> } {
  const rows = new Map<string, Row>();
  const rec = (r: Row): DeliveryRecord => {
    const { leaseUntil: _l, leaseToken: _t, parked: _p, ...rest } = r;
    return { ...rest };
  };
  const insert = (input: Parameters<DeliveriesRepository['createPending']>[0], lease: { leaseUntil: number; leaseToken?: string } = { leaseUntil: 0 }): Row | undefined => {
    if ([...rows.values()].some((r) => r.webhookId === input.webhookId && r.eventId === input.eventId)) return undefined;
    const id = `whd_${randomUUID()}`;
    const row: Row = {
      id, teamId: input.teamId, webhookId: input.webhookId, eventId: input.eventId, type: input.type, payload: input.payload, status: 'PENDING',
      attempt: 0, nextAttemptAt: input.now, lastError: null, responseStatus: null, responseTimeMs: null, responseText: null,
      createdAt: input.now, updatedAt: input.now, ...lease,
    };
    rows.set(id, row);
    return row;
  };
  const claimable = (r: Row, now: Date, exclude: readonly string[]) =>
    r.status === 'PENDING' && r.leaseUntil < now.getTime() && !r.parked && !exclude.includes(r.webhookId);
  return {
    rows,
    async ensureIndexes() {},
    async createPending(input) {
      return insert(input) !== undefined;
    },
    async createPendingMany(inputs) {
      let n = 0;
      for (const input of inputs) if (await this.createPending(input)) n++;
      return n;
    },
    async createQueuedMany(inputs) {
      return this.createPendingMany(inputs);
    },
    async createClaimedMany(inputs, now, leaseMs) {
      const leaseToken = randomUUID();
      const out: ClaimedDelivery[] = [];
      for (const input of inputs) {
        // Written leased, as the repository writes it: no moment in which a claim could take it.
        const r = insert(input, { leaseUntil: now.getTime() + leaseMs, leaseToken });
        if (r) out.push({ record: rec(r), leaseToken, scheduled: true });
      }
      return out;
    },
    async directClaims(inputs) {
      // Stored nowhere by the repository; here a row leased to the claim stands for it (only this claim records it).
      const now = new Date();
      return (await this.createClaimedMany(inputs, now, 3_600_000)).map((c) => ({ ...c, unwritten: true, unstored: true }));
    },
    async insertFinished(input) {
      const id = input.id ?? `whd_${randomUUID()}`;
      const row: Row = { ...input, id, leaseUntil: 0 };
      rows.set(id, row);
      return rec(row);
    },
    async claimDue(now, leaseMs, exclude) {
      const due = [...rows.values()].filter((r) => claimable(r, now, exclude) && r.nextAttemptAt !== null && r.nextAttemptAt <= now)
        .sort((a, b) => a.nextAttemptAt!.getTime() - b.nextAttemptAt!.getTime())[0];
      if (!due) return undefined;
      due.leaseUntil = now.getTime() + leaseMs;
      due.leaseToken = randomUUID();
      return { record: rec(due), leaseToken: due.leaseToken, scheduled: true };
    },
    async claimDueMany(now, leaseMs, exclude, slots) {
      const first = await this.claimDue(now, leaseMs, exclude);
      if (!first) return [];
      const out = [first];
      const webhookId = first.record.webhookId;
      for (let n = slots(webhookId); out.length < n;) {
        const others = [...rows.values()].filter((r) => r.webhookId !== webhookId).map((r) => r.webhookId);
        const next = await this.claimDue(now, leaseMs, [...exclude, ...others]);
        if (!next) break;
        out.push(next);
      }
      return out;
    },
    async finishMany(items, now) {
      const out = [];
      for (const { claim, result } of items) out.push(await this.finish(claim, result, now));
      return out;
    },
    async claimForRetry(teamId, webhookId, id, now, leaseMs) {
      const r = rows.get(id);
      if (!r || r.teamId !== teamId || r.webhookId !== webhookId) return undefined;
      if (r.leaseUntil >= now.getTime()) return 'busy';
      r.leaseUntil = now.getTime() + leaseMs;
      r.leaseToken = randomUUID();
      r.parked = false;
      return { record: rec(r), leaseToken: r.leaseToken, scheduled: r.status === 'PENDING' };
    },
    async finish(claim: ClaimedDelivery, result, now) {
      const r = rows.get(claim.record.id);
      if (!r || r.leaseToken !== claim.leaseToken) return undefined;
      Object.assign(r, result, { updatedAt: now, leaseUntil: 0, leaseToken: undefined });
      return rec(r);
    },
    async release(claim) {
      const r = rows.get(claim.record.id);
      if (r && r.leaseToken === claim.leaseToken) Object.assign(r, { leaseUntil: 0, leaseToken: undefined });
    },
    async releaseMany(claims) {
      for (const c of claims) await this.release(c);
    },
    async park(claim) {
      const r = rows.get(claim.record.id);
      if (r && r.leaseToken === claim.leaseToken) Object.assign(r, { leaseUntil: 0, leaseToken: undefined, parked: true });
    },
    async unpark(webhookId) {
      let n = 0;
      for (const r of rows.values()) {
        if (r.webhookId === webhookId && r.parked) {
          r.parked = false;
          n++;
        }
      }
      return n;
    },
    async cancelPending(webhookId, reason, now) {
      let n = 0;
      for (const r of rows.values()) {
        if (r.webhookId === webhookId && r.status === 'PENDING') {
          Object.assign(r, { status: 'FAILED', nextAttemptAt: null, lastError: reason, updatedAt: now, parked: false });
          n++;
        }
      }
      return n;
    },
    async get(teamId, webhookId, id) {
      const r = rows.get(id);
      return r && r.teamId === teamId && r.webhookId === webhookId ? rec(r) : undefined;
    },
    async list(teamId, webhookId, q) {
      const all = [...rows.values()].filter((r) => r.teamId === teamId && r.webhookId === webhookId && (!q.status || r.status === q.status)).reverse();
      return { records: all.slice(q.skip, q.skip + q.limit).map(rec), count: all.length };
    },
    async nextDueAt(now, exclude) {
      const due = [...rows.values()].filter((r) => claimable(r, now, exclude) && r.nextAttemptAt !== null)
        .sort((a, b) => a.nextAttemptAt!.getTime() - b.nextAttemptAt!.getTime())[0];
      return due?.nextAttemptAt ?? undefined;
    },
    async repairQueue() {
      return 0;
    },
    async sweep(cutoff, now) {
      let n = 0;
      for (const [id, r] of rows) {
        if (r.createdAt < cutoff && r.leaseUntil < now.getTime()) {
          rows.delete(id);
          n++;
        }
      }
      return n;
    },
  };
}

export interface PostCall { target: WebhookTarget; body: string; headers: Readonly<Record<string, string>> }

/** An endpoint that answers from a script (default 200) and records every post. */
export function fakeEndpoint(answer: (call: PostCall) => AttemptResult | Promise<AttemptResult> = () => ({ ok: true, status: 200, durationMs: 5, responseText: 'ok' })) {
  const calls: PostCall[] = [];
  const vetted: string[] = [];
  const client: EndpointClient = {
    async vet(target) {
      vetted.push(target.url);
    },
    async post(target, body, headers) {
      const call = { target, body, headers };
      calls.push(call);
      return answer(call);
    },
  };
  return { client, calls, vetted };
}

export const failure = (status = 500): AttemptResult => ({ ok: false, status, durationMs: 3, responseText: 'nope', error: `receiver answered ${status}` });
export const success = (): AttemptResult => ({ ok: true, status: 200, durationMs: 3, responseText: 'ok' });
