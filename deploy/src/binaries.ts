import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { defaultBinDir, repoRoot } from './paths.js';

/** The nats-server module that `go install` builds (ENVIRONMENT-NOTES: 2.11 for consumer pause, direct batch get). */
export const NATS_SERVER_MODULE = 'github.com/nats-io/nats-server/v2@v2.11.17';

export interface Binaries {
  natsServer: string;
  ferretdb: string;
}

export interface EnsureBinariesOptions {
  /** Where to put built binaries; default `<repo>/.bin`. */
  binDir?: string;
  /** Progress messages (a build can take minutes on a fresh machine). Default: stderr. */
  log?: (message: string) => void;
  /** Build only these; default both. */
  only?: ReadonlyArray<keyof Binaries>;
  env?: NodeJS.ProcessEnv;
}

/** Paths of the binaries without building anything: env overrides first, then `<binDir>`. */
export function resolveBinaries(opts: { binDir?: string; env?: NodeJS.ProcessEnv } = {}): Binaries {
  const env = opts.env ?? process.env;
  const binDir = opts.binDir ?? defaultBinDir();
  return {
    natsServer: env['NATS_SERVER_BIN'] || path.join(binDir, 'nats-server'),
    ferretdb: env['FERRETDB_BIN'] || path.join(binDir, 'ferretdb-launcher'),
  };
}

/** Throws a message that says how to get the binary when it is not there. */
export function assertBinary(file: string, what: string, env: NodeJS.ProcessEnv = process.env): void {
  if (!fs.existsSync(file)) {
    const variable = what === 'nats-server' ? 'NATS_SERVER_BIN' : 'FERRETDB_BIN';
    if (env[variable]) throw new Error(`${variable} points at ${file}, which does not exist`);
    throw new Error(
      `${what} not found at ${file}. Run \`npm start\` once (it builds it), call ensureBinaries() ` +
        `from @mailfleet/deploy, or point ${what === 'nats-server' ? 'NATS_SERVER_BIN' : 'FERRETDB_BIN'} at a binary.`,
    );
  }
}

/**
 * Builds nats-server and the FerretDB launcher from source with the Go toolchain
 * when they are missing (or, for the launcher, older than its sources). A fresh
 * CI machine has only Go, Node and npm, so this is how the embedded servers get there.
 * NATS_SERVER_BIN / FERRETDB_BIN skip the build for that binary.
 */
export async function ensureBinaries(opts: EnsureBinariesOptions = {}): Promise<Binaries> {
  const env = opts.env ?? process.env;
  const binDir = opts.binDir ?? defaultBinDir();
  const log = opts.log ?? ((m: string) => process.stderr.write(`[binaries] ${m}\n`));
  const only = new Set(opts.only ?? ['natsServer', 'ferretdb']);
  const bins = resolveBinaries({ binDir, env });

  if (only.has('natsServer')) {
    if (env['NATS_SERVER_BIN']) assertBinary(bins.natsServer, 'nats-server', env);
    else if (await natsServerIsStale(binDir)) await buildNatsServer(binDir, env, log);
  }
  if (only.has('ferretdb')) {
    if (env['FERRETDB_BIN']) assertBinary(bins.ferretdb, 'ferretdb-launcher', env);
    else if (await ferretDbIsStale(bins.ferretdb)) await buildFerretDb(bins.ferretdb, env, log);
  }
  return bins;
}

function ferretDbSourceDir(): string {
  return path.join(repoRoot(), 'deploy', 'ferretdb');
}

async function mtimeMs(file: string): Promise<number | undefined> {
  try {
    return (await fsp.stat(file)).mtimeMs;
  } catch {
    return undefined;
  }
}

async function natsServerIsStale(binDir: string): Promise<boolean> {
  if ((await mtimeMs(path.join(binDir, 'nats-server'))) === undefined) return true;
  // A version bump in NATS_SERVER_MODULE rebuilds it.
  const stamp = await fsp.readFile(path.join(binDir, 'nats-server.version'), 'utf8').catch(() => '');
  return stamp.trim() !== NATS_SERVER_MODULE;
}

async function ferretDbIsStale(binary: string): Promise<boolean> {
  const built = await mtimeMs(binary);
  if (built === undefined) return true;
  const dir = ferretDbSourceDir();
  const sources = (await fsp.readdir(dir)).filter((f) => f.endsWith('.go') || f === 'go.mod' || f === 'go.sum' || f === 'patches.json');
  const overlays = (await fsp.readdir(path.join(dir, '_overlay'), { recursive: true }).catch(() => [] as string[]))
    .filter((f) => f.endsWith('.go')).map((f) => path.join('_overlay', f));
  for (const source of [...sources, ...overlays]) {
    const changed = await mtimeMs(path.join(dir, source));
    if (changed !== undefined && changed > built) return true;
  }
  return false;
}

async function buildNatsServer(binDir: string, env: NodeJS.ProcessEnv, log: (m: string) => void): Promise<void> {
  await fsp.mkdir(binDir, { recursive: true });
  // Install into a private directory and rename, so two concurrent builds never expose a half-written file.
  const staging = await fsp.mkdtemp(path.join(binDir, '.nats-build-'));
  try {
    log(`building nats-server: go install ${NATS_SERVER_MODULE}`);
    await runGo(['install', NATS_SERVER_MODULE], { cwd: binDir, env: { ...goEnv(env), GOBIN: staging } });
    await fsp.rename(path.join(staging, 'nats-server'), path.join(binDir, 'nats-server'));
    await fsp.writeFile(path.join(binDir, 'nats-server.version'), `${NATS_SERVER_MODULE}\n`);
    log(`nats-server ready: ${path.join(binDir, 'nats-server')}`);
  } finally {
    await fsp.rm(staging, { recursive: true, force: true });
  }
}

async function buildFerretDb(binary: string, env: NodeJS.ProcessEnv, log: (m: string) => void): Promise<void> {
  await fsp.mkdir(path.dirname(binary), { recursive: true });
  const staging = `${binary}.${process.pid}.tmp`;
  try {
    log('building the FerretDB launcher (deploy/ferretdb; the first build can take a few minutes)');
    const patched = await writePatchedModfile(env);
    try {
      await runGo(['build', '-modfile', patched.modfile, '-o', staging, '.'], { cwd: ferretDbSourceDir(), env: goEnv(env) });
    } finally {
      await fsp.rm(patched.dir, { recursive: true, force: true });
    }
    await fsp.rename(staging, binary);
    log(`ferretdb-launcher ready: ${binary}`);
  } finally {
    await fsp.rm(staging, { force: true });
  }
}

/**
 * Runs `go test` on packages of the patched FerretDB module (its own tests and
 * the overlays' tests, against the patched code and patched dependencies);
 * resolves with the output, rejects when a test fails.
 */
export async function testPatchedFerretDb(packages: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const patched = await writePatchedModfile(env);
  try {
    const copy = patched.copies.get(FERRETDB_MODULE);
    if (!copy) throw new Error(`deploy/ferretdb/patches.json patches nothing of ${FERRETDB_MODULE}`);
    // FerretDB's test helpers find the repository root by its .git directory, which a module copy lacks.
    await fsp.mkdir(path.join(copy, '.git'), { recursive: true });
    // A test binary whose main module is FerretDB refuses to start without the version file its release build generates.
    await fsp.writeFile(path.join(copy, 'build', 'version', 'version.txt'), 'v0.0.0-mailfleet-test\n');
    // The other patched modules (its dependencies) are tested as the launcher is built: patched.
    for (const [module, dir] of patched.copies) {
      if (module !== FERRETDB_MODULE) await runGo(['mod', 'edit', `-replace=${module}=${dir}`], { cwd: copy, env: goEnv(env) });
    }
    return await runGo(['test', '-count=1', ...packages], { cwd: copy, env: goEnv(env) });
  } finally {
    await fsp.rm(patched.dir, { recursive: true, force: true });
  }
}

const FERRETDB_MODULE = 'github.com/FerretDB/FerretDB';

interface SourcePatch {
  module: string;
  file: string;
  find: string;
  replace: string;
  count: number;
}

/** A whole file added to a patched module: `source` is relative to deploy/ferretdb (under _overlay, which the Go tools skip as a package of the launcher). */
interface SourceOverlay {
  module: string;
  file: string;
  source: string;
}

/**
 * The patches of deploy/ferretdb/patches.json: each patched module is copied
 * from the module cache into a temporary directory, patched there and used
 * through a temporary go.mod with a `replace` (`go build -modfile`); the
 * module cache and deploy/ferretdb/go.mod stay untouched.
 */
async function writePatchedModfile(env: NodeJS.ProcessEnv): Promise<{ dir: string; modfile: string; copies: ReadonlyMap<string, string> }> {
  const src = ferretDbSourceDir();
  const spec = JSON.parse(await fsp.readFile(path.join(src, 'patches.json'), 'utf8')) as { patches: SourcePatch[]; overlays?: SourceOverlay[] };
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'ferretdb-patched-'));
  const copies = new Map<string, string>();
  const copyOf = async (module: string): Promise<string> => {
    let copy = copies.get(module);
    if (!copy) {
      const downloaded = JSON.parse(await runGo(['mod', 'download', '-json', module], { cwd: src, env: goEnv(env) })) as { Dir?: string };
      if (!downloaded.Dir) throw new Error(`go mod download ${module} gave no directory`);
      copy = path.join(dir, `module-${copies.size}`);
      await fsp.cp(downloaded.Dir, copy, { recursive: true });
      copies.set(module, copy);
    }
    return copy;
  };
  for (const overlay of spec.overlays ?? []) {
    const file = path.join(await copyOf(overlay.module), overlay.file);
    if (await mtimeMs(file) !== undefined) throw new Error(`FerretDB overlay ${overlay.source} would replace ${overlay.file}, which the module has: patch it instead`);
    await fsp.copyFile(path.join(src, overlay.source), file);
  }
  for (const [i, patch] of spec.patches.entries()) {
    const copy = await copyOf(patch.module);
    const file = path.join(copy, patch.file);
    const source = await fsp.readFile(file, 'utf8');
    const found = source.split(patch.find).length - 1;
    if (found !== patch.count) {
      throw new Error(`FerretDB patch ${i} (${patch.file}) expects "${patch.find}" ${patch.count} times, found ${found}: update deploy/ferretdb/patches.json for this version`);
    }
    await fsp.chmod(file, 0o644);
    await fsp.writeFile(file, source.split(patch.find).join(patch.replace));
  }
  const replaces = [...copies].map(([mod, copy]) => `replace ${mod} => ${copy}`).join('\n');
  const modfile = path.join(dir, 'go.mod');
  await fsp.writeFile(modfile, `${await fsp.readFile(path.join(src, 'go.mod'), 'utf8')}\n${replaces}\n`);
  await fsp.copyFile(path.join(src, 'go.sum'), path.join(dir, 'go.sum'));
  return { dir, modfile, copies };
}

function goEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  // Pure-Go builds (modernc sqlite needs no C compiler): static binaries, no gcc on CI.
  return { ...env, CGO_ENABLED: env['CGO_ENABLED'] ?? '0' };
}

/** Runs go; resolves with its standard output. */
function runGo(args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv }): Promise<string> {
  return new Promise((resolve, reject) => {
    const output: string[] = [];
    const stdout: Buffer[] = [];
    const child = spawn('go', args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer): void => {
      output.push(chunk.toString('utf8'));
      if (output.length > 400) output.splice(0, output.length - 400);
    };
    child.stdout.on('data', (chunk: Buffer) => {
      stdout.push(chunk);
      keep(chunk);
    });
    child.stderr.on('data', keep);
    child.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') {
        reject(
          new Error(
            'The Go toolchain (`go`) is not on PATH. mailfleet builds nats-server and the FerretDB launcher ' +
              'from source with Go >= 1.24: install Go (https://go.dev/dl/), or set NATS_SERVER_BIN and ' +
              'FERRETDB_BIN to prebuilt binaries, or set NATS_URL and MONGO_URL to servers of your own.',
          ),
        );
      } else {
        reject(error);
      }
    });
    child.once('close', (code) => {
      if (code === 0) resolve(Buffer.concat(stdout).toString('utf8'));
      else reject(new Error(`go ${args.join(' ')} failed (exit ${code}) in ${opts.cwd}:\n${output.join('').trim()}`));
    });
  });
}
