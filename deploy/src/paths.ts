import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** The repository root: this file lives at `<repo>/deploy/{src,dist}/paths.*`. */
export function repoRoot(): string {
  return path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
}

/** Where `npm start` keeps data unless MAILFLEET_DATA_DIR says otherwise. */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env['MAILFLEET_DATA_DIR'];
  return fromEnv ? path.resolve(fromEnv) : path.join(repoRoot(), '.data');
}

/** Where built Go binaries go (gitignored). */
export function defaultBinDir(): string {
  return path.join(repoRoot(), '.bin');
}
