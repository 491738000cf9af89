import type { Logger } from '@mailfleet/kit';
import type { ContactBooksRepository } from '../repositories/contact-books.repository.js';
import type { ContactsRepository } from '../repositories/contacts.repository.js';

export interface BookPurger {
  /** Starts the periodic sweep that finishes deletions (including ones a crash interrupted). */
  start(): void;
  /** Purges one book now, in the background (right after DeleteContactBook). */
  kick(bookId: string, deletingAt: Date): void;
  /** One sweep over every book being deleted; resolves when done (tests, shutdown). */
  sweepOnce(): Promise<void>;
  stop(): Promise<void>;
}

export interface BookPurgerDeps {
  readonly books: ContactBooksRepository;
  readonly contacts: ContactsRepository;
  readonly logger: Logger;
  readonly intervalMs: number;
  /**
   * How long a book document stays (invisible) after its deletion began. A
   * contact create that passed its book check just before the deletion lands
   * within an RPC deadline; the sweep during this window deletes it too.
   */
  readonly graceMs: number;
  readonly batchSize: number;
  /** After a batch of contacts was deleted: publish their `contact.deleted` soon. */
  readonly onBatch?: () => void;
  readonly now?: () => Date;
}

/**
 * Second phase of a book deletion: deletes the book's contacts in batches
 * (each one a tombstone carrying `contact.deleted`), then the book document.
 * Every replica runs it; two replicas purging the same book cannot delete a
 * contact twice (each deletion is a compare-and-set on a live contact).
 */
export function createBookPurger(deps: BookPurgerDeps): BookPurger {
  const now = deps.now ?? (() => new Date());
  const active = new Map<string, Promise<void>>();
  let timer: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> | undefined;
  let stopped = false;

  async function purge(bookId: string, deletingAt: Date): Promise<void> {
    for (;;) {
      if (stopped) return;
      const found = await deps.contacts.purgeBatch(bookId, deps.batchSize, now());
      if (found === 0) break;
      deps.onBatch?.();
    }
    if (now().getTime() - deletingAt.getTime() >= deps.graceMs && (await deps.contacts.liveCountOfBook(bookId)) === 0) {
      await deps.books.purge(bookId);
      deps.logger.info({ contactBookId: bookId }, 'contact book purged');
    }
  }

  function purgeOnce(bookId: string, deletingAt: Date): Promise<void> {
    const running = active.get(bookId);
    if (running) return running;
    const p = purge(bookId, deletingAt)
      .catch((err: unknown) => deps.logger.warn({ err, contactBookId: bookId }, 'contact book purge failed; the sweeper retries'))
      .finally(() => active.delete(bookId));
    active.set(bookId, p);
    return p;
  }

  async function sweepOnce(): Promise<void> {
    const books = await deps.books.deleting(50);
    for (const b of books) {
      if (stopped) return;
      await purgeOnce(b.id, b.deletingAt);
    }
  }

  function tick(): void {
    if (sweeping || stopped) return;
    sweeping = sweepOnce()
      .catch((err: unknown) => deps.logger.warn({ err }, 'contact book sweep failed; will retry'))
      .finally(() => {
        sweeping = undefined;
      });
  }

  return {
    start() {
      stopped = false;
      timer = setInterval(tick, deps.intervalMs);
      timer.unref();
      tick();
    },
    kick(bookId, deletingAt) {
      if (!stopped) void purgeOnce(bookId, deletingAt);
    },
    sweepOnce,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await Promise.allSettled([sweeping, ...active.values()]);
    },
  };
}
