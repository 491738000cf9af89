import { MongoClient, type CommandStartedEvent, type MongoClientOptions } from 'mongodb';

/**
 * Commands that touch no stored document: the connection handshake, authentication, liveness and
 * session bookkeeping. They are not storage operations, so neither this counter nor the bench
 * (which reads FerretDB's per-command statistics) counts them.
 */
export const NON_STORAGE_COMMANDS: ReadonlySet<string> = new Set([
  'hello',
  'isMaster',
  'ismaster',
  'ping',
  'endSessions',
  'saslStart',
  'saslContinue',
  'authenticate',
  'buildInfo',
  'buildinfo',
  'getParameter',
]);

/** How often one command ran on one collection of one database. */
export interface StorageOpCount {
  database: string;
  command: string;
  /** Empty when the command names no collection (e.g. dropDatabase). */
  collection: string;
  count: number;
}

export interface StorageOpsReport {
  /** Every counted command; a batched command (insertMany, bulkWrite of one kind) counts once. */
  total: number;
  /** Per database, command and collection, the most frequent first. */
  byKey: StorageOpCount[];
  /** The count of the commands matching every given field (e.g. `{command: 'insert'}`). */
  count(filter: Partial<Omit<StorageOpCount, 'count'>>): number;
}

export interface StorageOpsCounter {
  /** Forgets what was counted and starts counting. */
  start(): void;
  /** Stops counting and reports what ran since start(); a second stop() reports the same window. */
  stop(): StorageOpsReport;
  /** What ran since start(), without stopping. */
  snapshot(): StorageOpsReport;
  /** Stops listening to the client (the client stays open). */
  detach(): void;
}

/** The collection a command names: its first field's value for most, `collection` for getMore. */
export function commandCollection(event: Pick<CommandStartedEvent, 'commandName' | 'command'>): string {
  const doc = event.command as Record<string, unknown>;
  if (event.commandName === 'getMore' && typeof doc['collection'] === 'string') return doc['collection'];
  const first = doc[event.commandName];
  return typeof first === 'string' ? first : '';
}

/**
 * Counts the storage commands a client sends, per database/command/collection, between start() and
 * stop(). The client must have been created with `monitorCommands: true` (the driver emits no
 * command events otherwise): a client without it is refused rather than counted as zero.
 */
export function countStorageOps(client: MongoClient): StorageOpsCounter {
  if (client.options.monitorCommands !== true) {
    throw new Error('countStorageOps needs a MongoClient created with monitorCommands: true');
  }
  const counts = new Map<string, StorageOpCount>();
  let counting = false;
  const onStarted = (event: CommandStartedEvent): void => {
    if (!counting || NON_STORAGE_COMMANDS.has(event.commandName)) return;
    const collection = commandCollection(event);
    const key = `${event.databaseName}\u0000${event.commandName}\u0000${collection}`;
    const entry = counts.get(key);
    if (entry) entry.count += 1;
    else counts.set(key, { database: event.databaseName, command: event.commandName, collection, count: 1 });
  };
  client.on('commandStarted', onStarted);
  const report = (): StorageOpsReport => {
    const byKey = [...counts.values()].map((c) => ({ ...c })).sort((a, b) => b.count - a.count);
    return {
      total: byKey.reduce((sum, c) => sum + c.count, 0),
      byKey,
      count: (filter) =>
        byKey
          .filter((c) => (Object.keys(filter) as (keyof typeof filter)[]).every((k) => filter[k] === undefined || c[k] === filter[k]))
          .reduce((sum, c) => sum + c.count, 0),
    };
  };
  return {
    start() {
      counts.clear();
      counting = true;
    },
    stop() {
      counting = false;
      return report();
    },
    snapshot: report,
    detach() {
      counting = false;
      client.off('commandStarted', onStarted);
    },
  };
}

/** A connected client with command monitoring on, and its counter. Close the client when done. */
export async function connectCountingClient(
  url: string,
  options: MongoClientOptions = {},
): Promise<{ client: MongoClient; ops: StorageOpsCounter }> {
  const client = new MongoClient(url, { ...options, monitorCommands: true });
  await client.connect();
  return { client, ops: countStorageOps(client) };
}
