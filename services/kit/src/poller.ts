import type { Logger } from './logger.js';

export interface Poller {
  start(): void;
  /** Asks for a pass soon; a kick during a pass queues exactly one more pass. */
  kick(): void;
  /** Stops scheduling and waits for the pass in progress. */
  stop(): Promise<void>;
}

/**
 * Runs `pass` now and then: after each pass it waits `nextDelayMs()` (default
 * `intervalMs`), a `kick` runs it sooner, and passes never overlap. The
 * background loop of the outbox relay and of workers that claim due work.
 */
export function createPoller(opts: {
  name: string;
  pass: () => Promise<unknown>;
  logger: Logger;
  intervalMs: number;
  /** Delay before the next pass, e.g. until the next due item; errors fall back to intervalMs. */
  nextDelayMs?: () => Promise<number>;
  /** Delay after a failed pass (default intervalMs), e.g. to retry sooner than a slow interval. */
  retryMs?: number;
}): Poller {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = true;

  function schedule(delay: number): void {
    if (stopped) return;
    clearTimeout(timer);
    timer = setTimeout(tick, Math.max(0, delay));
  }

  function tick(): void {
    if (running) {
      again = true;
      return;
    }
    let failed = false;
    running = opts.pass()
      .then(() => undefined, (err: unknown) => {
        failed = true;
        opts.logger.warn({ err }, `${opts.name} pass failed; will retry`);
      })
      .finally(() => {
        running = undefined;
        if (again) {
          again = false;
          schedule(0);
        } else if (failed) {
          schedule(opts.retryMs ?? opts.intervalMs);
        } else if (!stopped) {
          const next = opts.nextDelayMs?.() ?? Promise.resolve(opts.intervalMs);
          void next.then(schedule, () => schedule(opts.intervalMs));
        }
      });
  }

  return {
    start() {
      stopped = false;
      schedule(0);
    },
    kick() {
      if (stopped) return;
      if (running) again = true;
      else schedule(0);
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
