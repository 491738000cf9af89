import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';

/**
 * Secrets that services require and that a local run must invent: on the first
 * start each gets 32 random bytes (hex), kept in `<dataDir>/secrets.json` so
 * that data written under them (API key hashes, encrypted DKIM keys) stays
 * readable across restarts. A variable set in the environment wins. A service
 * that adds a required secret adds its name here.
 */
export const LOCAL_SECRETS = ['API_KEY_HASH_SECRET', 'DKIM_MASTER_KEY', 'TRACKING_SIGNING_KEY'] as const;

export async function loadLocalSecrets(
  dataDir: string,
  lookup: (key: string) => string | undefined,
): Promise<Record<string, string>> {
  const file = path.join(dataDir, 'secrets.json');
  let stored: Record<string, string> = {};
  try {
    stored = JSON.parse(await fsp.readFile(file, 'utf8')) as Record<string, string>;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`cannot read ${file}: ${(error as Error).message}`);
  }
  const result: Record<string, string> = {};
  let changed = false;
  for (const name of LOCAL_SECRETS) {
    const fromEnv = lookup(name);
    if (fromEnv !== undefined) {
      result[name] = fromEnv;
      continue;
    }
    let value = stored[name];
    if (value === undefined) {
      value = randomBytes(32).toString('hex');
      stored[name] = value;
      changed = true;
    }
    result[name] = value;
  }
  if (changed) {
    await fsp.mkdir(dataDir, { recursive: true });
    await fsp.writeFile(file, `${JSON.stringify(stored, null, 2)}\n`, { mode: 0o600 });
  }
  return result;
}
