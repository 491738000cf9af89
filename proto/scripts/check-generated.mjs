#!/usr/bin/env node
// Fails when the committed generated code (src/gen) is not what a fresh
// `buf generate` produces from the .proto files, when a .proto file is not
// buf-formatted, or when `buf lint` finds a problem. Used by
// `npm run check -w proto` (root: `npm run proto:check`) and CI.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const protoDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const genDir = 'src/gen';

// buf and protoc-gen-ts_proto are npm packages: make them resolvable by PATH
// even when this script runs outside `npm run`.
const env = {
  ...process.env,
  PATH: [join(protoDir, 'node_modules', '.bin'), join(protoDir, '..', 'node_modules', '.bin'), process.env.PATH]
    .filter(Boolean)
    .join(delimiter),
};

function buf(args) {
  const result = spawnSync('buf', args, { cwd: protoDir, env, stdio: 'inherit' });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

/** Files under dir, as POSIX paths relative to it, sorted. */
function listFiles(dir) {
  const out = [];
  const walk = (current) => {
    let entries;
    try {
      entries = readdirSync(current, { withFileTypes: true });
    } catch (error) {
      if (error.code === 'ENOENT') return;
      throw error;
    }
    for (const entry of entries) {
      const path = join(current, entry.name);
      if (entry.isDirectory()) walk(path);
      else out.push(relative(dir, path).split(sep).join('/'));
    }
  };
  walk(dir);
  return out.sort();
}

const problems = [];

if (buf(['lint']) !== 0) problems.push('buf lint failed (see above)');

if (buf(['format', '--diff', '--exit-code']) !== 0) {
  problems.push('.proto files are not buf-formatted (see the diff above); run `npx buf format -w` in proto/');
}

const tmp = mkdtempSync(join(tmpdir(), 'mailfleet-proto-check-'));
try {
  if (buf(['generate', '--output', tmp]) !== 0) {
    problems.push('buf generate failed (see above)');
  } else {
    const committedRoot = join(protoDir, genDir);
    const freshRoot = join(tmp, genDir);
    const committed = new Set(listFiles(committedRoot));
    const fresh = new Set(listFiles(freshRoot));
    const missing = [...fresh].filter((f) => !committed.has(f));
    const extra = [...committed].filter((f) => !fresh.has(f));
    const changed = [...fresh].filter(
      (f) => committed.has(f) && !readFileSync(join(freshRoot, f)).equals(readFileSync(join(committedRoot, f))),
    );
    if (missing.length + extra.length + changed.length > 0) {
      const lines = [
        ...changed.map((f) => `  differs:  ${genDir}/${f}`),
        ...missing.map((f) => `  missing:  ${genDir}/${f}`),
        ...extra.map((f) => `  stale:    ${genDir}/${f}`),
      ];
      problems.push(
        `generated code is out of date with the .proto files:\n${lines.join('\n')}\n` +
          '  run `npm run proto:gen` (root) or `npm run gen -w proto` and commit the result',
      );
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

if (problems.length > 0) {
  console.error(`\nproto check FAILED:\n- ${problems.join('\n- ')}`);
  process.exit(1);
}
console.log('proto check passed: lint clean, formatted, src/gen matches a fresh generation');
