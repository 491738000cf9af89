import { bindService, type OutboxRelay, type ServiceInfra, type ServiceParts } from '@mailfleet/kit';
import { contactsV1 } from '@mailfleet/proto';
import type { ContactsConfig } from './config.js';
import { createUnsubscribesConsumer } from './events/unsubscribes.consumer.js';
import { createContactBooksRepository } from './repositories/contact-books.repository.js';
import { createContactsRepository } from './repositories/contacts.repository.js';
import { createProcessedEventsRepository } from './repositories/processed-events.repository.js';
import { createContactsHandlers } from './rpc/contacts.rpc.js';
import { createBookPurger } from './workers/book-purge.worker.js';

/**
 * Binds the contacts service: repositories (indexes created at start), the
 * RPC handlers, the consumer of hard bounces and complaints, the contact
 * book purger and the sweeper of handled event ids.
 */
export async function createContactsServer(deps: { config: ContactsConfig; infra: ServiceInfra }): Promise<ServiceParts> {
  const { config, infra } = deps;
  const { db } = infra.mongo;
  const books = createContactBooksRepository(db);
  const contacts = createContactsRepository(db);
  const processed = createProcessedEventsRepository(db);
  await Promise.all([books.ensureIndexes(), contacts.ensureIndexes(), processed.ensureIndexes()]);

  let relay: OutboxRelay | undefined;
  const kickRelay = (contactIds?: readonly string[]) => (contactIds ? relay?.kickIds(contacts.collection, contactIds) : relay?.kick());

  const purger = createBookPurger({
    books, contacts, logger: infra.logger,
    intervalMs: config.bookPurgeIntervalMs, graceMs: config.bookPurgeGraceMs, batchSize: config.bookPurgeBatchSize,
    onBatch: kickRelay,
  });
  const handlers = createContactsHandlers({ books, contacts, purger, kickRelay });

  const consumer = createUnsubscribesConsumer({
    nats: infra.nats, logger: infra.logger, metrics: infra.metrics, processed, retentionMs: config.processedEventRetentionMs,
    unsubscribeMany: async (requests) => {
      const teams = [...new Set(requests.map((r) => r.teamId))];
      const exclude = new Map(await Promise.all(teams.map(async (t) => [t, await books.deletingIds(t)] as const)));
      const n = await contacts.unsubscribeMany(requests, exclude, new Date());
      if (n > 0) kickRelay();
      return n;
    },
  });

  const sweeper = setInterval(() => {
    void processed.sweep(new Date()).catch((err: unknown) => infra.logger.warn({ err }, 'processed-event sweep failed'));
  }, 3_600_000);
  sweeper.unref();
  purger.start();

  return {
    services: [bindService<contactsV1.ContactsServiceServer>({
      name: 'contacts', definition: contactsV1.ContactsServiceService, handlers, logger: infra.logger, metrics: infra.metrics,
    })],
    consumers: [consumer],
    outboxCollections: [contacts.collection],
    onRelay: (r) => {
      relay = r;
    },
    workers: [
      { name: 'contact book purger', stop: () => purger.stop() },
      { name: 'processed-event sweeper', stop: async () => clearInterval(sweeper) },
    ],
  };
}
