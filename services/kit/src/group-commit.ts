/**
 * Group commit: callers that arrive within a few milliseconds of each other
 * share one write (PostgreSQL's group commit, Kafka's `linger.ms`). Each
 * `submit` resolves or rejects with its own item's result once the flush that
 * carried it has finished, so a caller still learns about its own write only
 * after it is durable, and a failed item fails only its own caller.
 *
 * At most one flush runs at a time: what arrives while one runs waits and
 * goes in the next, so the batch grows with the store's latency instead of
 * the number of writes growing with the load. On a store that serialises
 * writes per collection (FerretDB here) a second concurrent flush would only
 * queue behind the first anyway. The next batch still waits out the delay,
 * counted from its first item's arrival (Kafka's `linger.ms`): when the store
 * is slow and the items are few, each flush would otherwise carry only what
 * arrived during the one before it.
 */
export interface GroupCommitOptions<T, R> {
  /**
   * Writes a batch. Returns one outcome per item, in order: a value, or an
   * Error for an item that failed alone. Throwing fails the whole batch.
   */
  readonly flush: (items: readonly T[]) => Promise<readonly (R | Error)[]>;
  /** A batch is written as soon as it holds this many items (or this much weight, with `weigh`). */
  readonly maxItems: number;
  /**
   * The weight of an item (say, the documents a call writes), when batches are bounded by that rather than
   * by the number of items. A batch always takes at least one item, however heavy.
   */
  readonly weigh?: (item: T) => number;
  /** The longest the first item of a batch waits for others (counted from its arrival, also while a flush runs). */
  readonly maxDelayMs: number;
}

export interface GroupCommit<T, R> {
  /** Adds the item to the next batch; settles with its own outcome once that batch is written. */
  submit(item: T): Promise<R>;
  /** Writes what is waiting now and resolves once no flush is running. */
  drain(): Promise<void>;
  /** Items waiting or being written. */
  readonly size: number;
}

interface Waiting<T, R> {
  readonly item: T;
  /** When it was submitted (performance.now(): a clock step never stretches a linger). */
  readonly at: number;
  readonly resolve: (r: R) => void;
  readonly reject: (err: unknown) => void;
}

export function createGroupCommit<T, R>(opts: GroupCommitOptions<T, R>): GroupCommit<T, R> {
  if (!(opts.maxItems >= 1)) throw new Error('group commit: maxItems must be at least 1');
  if (!(opts.maxDelayMs >= 0)) throw new Error('group commit: maxDelayMs must not be negative');
  let waiting: Waiting<T, R>[] = [];
  let waitingWeight = 0;
  const weigh = opts.weigh ?? (() => 1);
  let inFlight = 0;
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;

  async function runBatch(batch: Waiting<T, R>[]): Promise<void> {
    inFlight = batch.length;
    let outcomes: readonly (R | Error)[];
    try {
      outcomes = await opts.flush(batch.map((w) => w.item));
      if (outcomes.length !== batch.length) throw new Error(`group commit: flush returned ${outcomes.length} outcomes for ${batch.length} items`);
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    } finally {
      inFlight = 0;
    }
    batch.forEach((w, i) => {
      const o = outcomes[i] as R | Error;
      if (o instanceof Error) w.reject(o);
      else w.resolve(o);
    });
  }

  function kick(): void {
    if (running || waiting.length === 0) return;
    clearTimeout(timer);
    timer = undefined;
    let take = 0;
    let weight = 0;
    while (take < waiting.length) {
      const w = weigh(waiting[take]!.item);
      if (take > 0 && weight + w > opts.maxItems) break;
      weight += w;
      take++;
    }
    const batch = waiting.slice(0, take);
    waiting = waiting.slice(take);
    waitingWeight -= weight;
    running = runBatch(batch).finally(() => {
      running = undefined;
      // What arrived meanwhile goes once it is a full batch or its first item has waited the delay.
      arm();
    });
  }

  /**
   * Writes now, or sets the timer for the first waiting item's linger. From a submit (`justArrived`) with nothing
   * running and no timer set, the item just submitted is the only one waiting: it waits the whole delay, and no
   * clock is read, so a slow tick between its arrival and this call never cuts its batch short.
   */
  function arm(justArrived = false): void {
    if (running || timer) return;
    if (waiting.length === 0) return;
    const left = justArrived ? opts.maxDelayMs : opts.maxDelayMs - (performance.now() - waiting[0]!.at);
    // A fresh item always goes through the timer, even at delay 0: what is submitted in the same tick joins it.
    if (waitingWeight >= opts.maxItems || (!justArrived && left <= 0)) {
      kick();
      return;
    }
    timer = setTimeout(() => {
      timer = undefined;
      kick();
    }, left);
  }

  return {
    submit(item) {
      return new Promise<R>((resolve, reject) => {
        waiting.push({ item, at: performance.now(), resolve, reject });
        waitingWeight += weigh(item);
        if (waitingWeight >= opts.maxItems) kick();
        else arm(true);
      });
    },
    async drain() {
      kick();
      while (running) {
        await running;
        kick();
      }
    },
    get size() {
      return waiting.length + inFlight;
    },
  };
}
