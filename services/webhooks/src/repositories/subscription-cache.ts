import type { Logger, NatsHandle } from '@mailfleet/kit';
import type { WebhookRecord, WebhooksRepository } from './webhooks.repository.js';

/**
 * Which webhooks an event goes to is asked once per event, and on FerretDB
 * every such query reads and decodes the team's webhooks: during a campaign
 * that is thousands of identical lookups a minute. This keeps each team's
 * ACTIVE webhooks in memory instead.
 *
 * Staleness is what matters: a webhook made (or re-activated, or given a new
 * event type) must get the events that happen after the change. So every
 * change through this repository drops the team's entry at once in this
 * replica and tells the others over NATS (`CHANGED_SUBJECT`, core NATS, not
 * the event stream); `ttlMs` bounds how long a replica that missed such a
 * note (NATS away) keeps an old list, and a reconnect drops everything.
 * Changes that only narrow the set (pause, delete, FAILED) are caught anyway
 * by the delivery worker, which reads the webhook before every attempt.
 */
export const CHANGED_SUBJECT = 'mailfleet-internal.webhooks.changed';

export interface SubscriptionCacheOptions {
  readonly ttlMs: number;
  /** Teams kept at most; the oldest entry goes first. */
  readonly maxTeams?: number;
  /** Tells the other replicas that a team's webhooks changed. */
  readonly broadcast?: (teamId: string) => void;
  readonly now?: () => number;
}

export interface CachedWebhooksRepository extends WebhooksRepository {
  /** ACTIVE webhooks of the team subscribed to `type` that existed when the event happened. */
  subscribed(teamId: string, type: string, eventCreatedAt: Date): Promise<WebhookRecord[]>;
  /** Forgets a team's webhooks (a change seen elsewhere). */
  invalidate(teamId: string): void;
  /** Forgets every team's. */
  clear(): void;
}

interface Entry {
  readonly at: number;
  readonly hooks: Promise<WebhookRecord[]>;
}

export function withSubscriptionCache(repo: WebhooksRepository, opts: SubscriptionCacheOptions): CachedWebhooksRepository {
  const now = opts.now ?? Date.now;
  const maxTeams = opts.maxTeams ?? 10_000;
  const entries = new Map<string, Entry>();

  function activeOf(teamId: string): Promise<WebhookRecord[]> {
    const hit = entries.get(teamId);
    if (hit && now() - hit.at < opts.ttlMs) return hit.hooks;
    // A lookup that an invalidation overtakes fills an entry nobody reads any more: never the map.
    const entry: Entry = { at: now(), hooks: repo.active(teamId) };
    entries.delete(teamId);
    entries.set(teamId, entry);
    if (entries.size > maxTeams) entries.delete(entries.keys().next().value as string);
    entry.hooks.catch(() => {
      if (entries.get(teamId) === entry) entries.delete(teamId);
    });
    return entry.hooks;
  }

  function changed(teamId: string): void {
    entries.delete(teamId);
    opts.broadcast?.(teamId);
  }

  /** Runs a change and forgets the team's entry once it is written (and if it fails half way, too). */
  async function changing<T>(teamId: string, write: Promise<T>): Promise<T> {
    try {
      return await write;
    } finally {
      changed(teamId);
    }
  }

  return {
    ...repo,
    invalidate: (teamId) => entries.delete(teamId),
    clear: () => entries.clear(),
    async subscribed(teamId, type, eventCreatedAt) {
      const hooks = await activeOf(teamId);
      return hooks.filter((w) => w.eventTypes.includes(type) && w.createdAt.getTime() <= eventCreatedAt.getTime());
    },
    create: (input) => changing(input.teamId, repo.create(input)),
    update: (teamId, id, patch, at) => changing(teamId, repo.update(teamId, id, patch, at)),
    delete: (teamId, id) => changing(teamId, repo.delete(teamId, id)),
    async recordFailure(teamId, id, at, eventFailed, threshold) {
      const r = await repo.recordFailure(teamId, id, at, eventFailed, threshold);
      if (r.turnedFailed) changed(teamId);
      return r;
    },
  };
}

/**
 * Wires the cache to NATS: a change here is announced, one announced by
 * another replica drops the team here, and a reconnect (notes may have been
 * missed) drops every team.
 */
export function connectSubscriptionCache(nats: NatsHandle, logger: Logger): {
  broadcast: (teamId: string) => void;
  attach: (cache: CachedWebhooksRepository) => () => void;
} {
  return {
    broadcast(teamId) {
      try {
        nats.nc.publish(CHANGED_SUBJECT, teamId);
      } catch (err) {
        logger.warn({ err, teamId }, 'could not announce a webhook change; other replicas see it within the cache lifetime');
      }
    },
    attach(cache) {
      const sub = nats.nc.subscribe(CHANGED_SUBJECT, {
        callback: (err, msg) => {
          if (!err) cache.invalidate(msg.string());
        },
      });
      let closed = false;
      void (async () => {
        for await (const s of nats.nc.status()) {
          if (closed) break;
          if (s.type === 'reconnect') cache.clear();
        }
      })().catch(() => undefined);
      return () => {
        closed = true;
        sub.unsubscribe();
      };
    },
  };
}
