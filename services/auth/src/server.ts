import { bindService, type ServiceInfra, type ServiceParts } from '@mailfleet/kit';
import { authV1 } from '@mailfleet/proto';
import type { AuthConfig } from './config.js';
import { createApiKeysRepository } from './repositories/api-keys.repository.js';
import { createCountersRepository } from './repositories/counters.repository.js';
import { createInvitesRepository } from './repositories/invites.repository.js';
import { createSessionsRepository } from './repositories/sessions.repository.js';
import { createTeamsRepository } from './repositories/teams.repository.js';
import { createUsersRepository } from './repositories/users.repository.js';
import { createAuthHandlers } from './rpc/auth.rpc.js';

/** Binds the auth service: repositories (indexes created at start), RPC handlers, the counter sweeper. */
export async function createAuthServer(deps: { config: AuthConfig; infra: ServiceInfra }): Promise<ServiceParts> {
  const { db } = deps.infra.mongo;
  const teams = createTeamsRepository(db);
  const keys = createApiKeysRepository(db);
  const rateWindows = createCountersRepository(db, 'rate_windows');
  const quotas = createCountersRepository(db, 'quota_counters');
  const loginAttempts = createCountersRepository(db, 'login_attempts');
  const users = createUsersRepository(db);
  const sessions = createSessionsRepository(db);
  const invites = createInvitesRepository(db);
  await Promise.all([
    teams.ensureIndexes(), keys.ensureIndexes(), rateWindows.ensureIndexes(), quotas.ensureIndexes(), loginAttempts.ensureIndexes(), sessions.ensureIndexes(), invites.ensureIndexes(),
  ]);

  let drainRelay: () => Promise<unknown> = async () => undefined;
  const handlers = createAuthHandlers({
    teams, keys, rateWindows, quotas, users, sessions, loginAttempts, invites,
    hashSecret: deps.config.apiKeyHashSecret,
    defaultRateLimit: deps.config.defaultRateLimit,
    kickRelay: async () => {
      // Publish now; if NATS is down the periodic relay publishes later (the key is already revoked in the database).
      await drainRelay().catch((err: unknown) => deps.infra.logger.warn({ err }, 'immediate outbox publish failed; relay will retry'));
    },
  });

  const sweeper = setInterval(() => {
    void Promise.all([rateWindows.sweep(), quotas.sweep(), loginAttempts.sweep(), sessions.sweep(), invites.sweep()]).catch((err: unknown) => deps.infra.logger.warn({ err }, 'counter and session sweep failed'));
  }, deps.config.sweepIntervalMs);
  sweeper.unref();

  return {
    services: [bindService<authV1.AuthServiceServer>({
      name: 'auth', definition: authV1.AuthServiceService, handlers, logger: deps.infra.logger, metrics: deps.infra.metrics,
    })],
    outboxCollections: [keys.collection],
    onRelay: (relay) => {
      drainRelay = () => relay.drainOnce();
    },
    workers: [{ name: 'counter sweeper', stop: async () => clearInterval(sweeper) }],
  };
}
