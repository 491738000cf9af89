import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { expect, inject } from 'vitest';

function provided(key: 'mongoUrl' | 'natsUrl'): string {
  const value = inject(key);
  if (!value) throw new Error(`${key} is not provided: run this test in the integration or e2e vitest project`);
  return value;
}

/** The run's MongoDB-compatible server (FerretDB unless MONGO_URL was set). */
export function testMongoUrl(): string {
  return provided('mongoUrl');
}

/** The run's NATS server (JetStream enabled). */
export function testNatsUrl(): string {
  return provided('natsUrl');
}

const runId = randomBytes(3).toString('hex');
const names = new Map<string, string>();

/**
 * A database name unique to this test file and run: `<prefix>_<file>_<hash>_<run>`,
 * within FerretDB's limits (63 characters of [a-z0-9_]). The same prefix in the
 * same file gives the same name; pass another prefix for a second database.
 */
export function uniqueDbName(prefix: string): string {
  const testPath = expect.getState().testPath ?? `unknown-${randomBytes(4).toString('hex')}`;
  const key = `${prefix}\u0000${testPath}`;
  const known = names.get(key);
  if (known) return known;
  const clean = (s: string): string => s.toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '');
  const file = clean(path.basename(testPath).replace(/\.test\.[cm]?[jt]s$/, '')).slice(0, 24);
  const hash = createHash('sha256').update(testPath).digest('hex').slice(0, 6);
  const name = `${clean(prefix).slice(0, 20)}_${file}_${hash}_${runId}`.slice(0, 63);
  names.set(key, name);
  return name;
}
