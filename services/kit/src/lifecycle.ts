import type { Logger } from './logger.js';

export interface ShutdownStep {
  readonly name: string;
  readonly run: () => Promise<void> | void;
}

export interface Lifecycle {
  /** Steps run in registration order on shutdown. */
  add(step: ShutdownStep): void;
  /** Runs every step once, in order; a failing step is logged and the rest still run. */
  shutdown(reason: string): Promise<void>;
  /** Installs SIGTERM/SIGINT handlers that shut down and exit (0 when clean, 1 on timeout or error). */
  installSignalHandlers(exit?: (code: number) => void): void;
}

export function createLifecycle(opts: { logger: Logger; timeoutMs?: number }): Lifecycle {
  const steps: ShutdownStep[] = [];
  let running: Promise<void> | undefined;
  let failed = false;
  const timeoutMs = opts.timeoutMs ?? 25_000;

  async function runSteps(reason: string): Promise<void> {
    opts.logger.info({ reason }, 'shutting down');
    for (const step of steps) {
      const started = Date.now();
      try {
        await step.run();
        opts.logger.debug({ step: step.name, ms: Date.now() - started }, 'shutdown step done');
      } catch (err) {
        failed = true;
        opts.logger.error({ err, step: step.name }, 'shutdown step failed');
      }
    }
    opts.logger.info('shutdown complete');
  }

  const lifecycle: Lifecycle = {
    add(step) {
      steps.push(step);
    },
    shutdown(reason) {
      running ??= runSteps(reason);
      return running;
    },
    installSignalHandlers(exit = (code) => process.exit(code)) {
      const onSignal = (signal: NodeJS.Signals) => {
        if (running) {
          opts.logger.warn({ signal }, 'second signal during shutdown; exiting now');
          exit(1);
          return;
        }
        const timer = setTimeout(() => {
          opts.logger.error({ timeoutMs }, 'shutdown timed out');
          exit(1);
        }, timeoutMs);
        timer.unref();
        void lifecycle.shutdown(signal).then(() => {
          clearTimeout(timer);
          exit(failed ? 1 : 0);
        });
      };
      process.once('SIGTERM', onSignal);
      process.once('SIGINT', onSignal);
    },
  };
  return lifecycle;
}

/** Retries an async start-up step until it succeeds or the abort signal fires. */
export async function retryUntil<T>(what: string, fn: () => Promise<T>, opts: { logger: Logger; signal?: AbortSignal; maxDelayMs?: number }): Promise<T> {
  let delay = 250;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      opts.logger.warn({ err: (err as Error).message, attempt }, `waiting for ${what}`);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, opts.maxDelayMs ?? 5_000);
    }
  }
}
