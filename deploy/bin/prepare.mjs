// Install + build + Go binaries: what `npm start`, `npm test` and CI do before anything else.
// Plain JavaScript on purpose: it runs before anything is built.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

const say = (message) => process.stderr.write(`[prepare] ${message}\n`);

/** Runs a command with inherited stdio; resolves to its exit code (never rejects on a non-zero exit). */
export function run(command, args, { cwd = repoRoot, env = process.env } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: 'inherit' });
    child.once('error', (error) =>
      reject(error.code === 'ENOENT' ? new Error(`\`${command}\` is not on PATH`) : error),
    );
    child.once('close', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

async function mustRun(command, args, opts) {
  const code = await run(command, args, opts);
  if (code !== 0) throw new Error(`\`${[command, ...args].join(' ')}\` failed with exit code ${code}`);
}

function mtime(file) {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Runs a command with its output captured; resolves to its exit code and output (never rejects on a non-zero exit). */
export function runQuiet(command, args, { cwd = repoRoot, env = process.env } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks = [];
    child.stdout.on('data', (c) => chunks.push(c));
    child.stderr.on('data', (c) => chunks.push(c));
    child.once('error', (error) =>
      reject(error.code === 'ENOENT' ? new Error(`\`${command}\` is not on PATH`) : error),
    );
    child.once('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output: Buffer.concat(chunks).toString('utf8') }));
  });
}

/** Why an install is needed, or undefined when node_modules is current. */
export function installReason(root = repoRoot) {
  if (!fs.existsSync(path.join(root, 'node_modules'))) return 'node_modules is missing';
  const installed = mtime(path.join(root, 'node_modules', '.package-lock.json'));
  if (installed === undefined) return 'node_modules/.package-lock.json is missing';
  const lock = mtime(path.join(root, 'package-lock.json'));
  if (lock !== undefined && lock > installed) return 'package-lock.json is newer than node_modules';
  return undefined;
}

/**
 * The install command. Not `npm ci`: it refuses this lockfile because the optional platform
 * packages of rollup (a vitest dependency) are missing from it, and the registry here does not
 * carry them. `npm install` installs the lockfile's versions (it only rewrites the lockfile when
 * package.json asks for something the lockfile does not hold). The log level hides npm's
 * warnings (install-scripts notices and the like); errors still come, with the captured output.
 */
export const INSTALL_ARGS = ['install', '--no-audit', '--no-fund', '--loglevel=error'];

export async function install(root = repoRoot) {
  const reason = installReason(root);
  if (!reason) return;
  say(`installing npm dependencies from package-lock.json (${reason}); this takes a minute the first time`);
  const { code, output } = await runQuiet('npm', INSTALL_ARGS, { cwd: root });
  if (code === 0) return;
  process.stderr.write(output);
  throw new Error(`\`npm ${INSTALL_ARGS.join(' ')}\` failed with exit code ${code} (its output is above)`);
}

/**
 * `tsc -b`: incremental, so a second run is fast. Builds the root tsconfig.json
 * when there is one; otherwise every workspace that has a tsconfig.json.
 */
export async function buildCommand(root = repoRoot) {
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  if (fs.existsSync(path.join(root, 'tsconfig.json'))) return [process.execPath, [tsc, '-b']];
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const projects = (pkg.workspaces ?? []).filter((w) => fs.existsSync(path.join(root, w, 'tsconfig.json')));
  return [process.execPath, [tsc, '-b', ...projects]];
}

export async function build(root = repoRoot) {
  const [command, args] = await buildCommand(root);
  say(`tsc ${args.slice(1).join(' ')}`);
  await mustRun(command, args, { cwd: root });
}

function newestMtime(entry) {
  const stat = fs.statSync(entry, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const name of fs.readdirSync(entry)) newest = Math.max(newest, newestMtime(path.join(entry, name)));
  return newest;
}

/** Why the web console needs a build, or undefined when gateway/console/dist is newer than its sources. */
export function consoleBuildReason(root = repoRoot) {
  const dir = path.join(root, 'gateway', 'console');
  if (!fs.existsSync(path.join(dir, 'package.json'))) return undefined;
  const built = mtime(path.join(dir, 'dist', 'index.html'));
  if (built === undefined) return 'gateway/console/dist is missing';
  const sources = ['src', 'index.html', 'vite.config.ts', 'package.json'].map((f) => newestMtime(path.join(dir, f)));
  if (Math.max(...sources) > built) return 'its sources changed';
  return undefined;
}

/** The web console (vite), served by the gateway from gateway/console/dist; skipped when up to date. */
export async function buildConsole(root = repoRoot) {
  const reason = consoleBuildReason(root);
  if (!reason) return;
  say(`building the web console (${reason})`);
  const { code, output } = await runQuiet('npm', ['run', 'build', '--silent', '-w', 'gateway/console'], { cwd: root });
  if (code !== 0) {
    process.stderr.write(output);
    throw new Error(`the web console build failed with exit code ${code} (its output is above)`);
  }
  const size = /initial JS: [^\n]+/.exec(output);
  if (size) say(`console ${size[0]}`);
}

export async function binaries(root = repoRoot, { buildDeploy = true } = {}) {
  // The Go build steps live in deploy's TypeScript; with --binaries-only nothing else is built yet.
  if (buildDeploy) {
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    await mustRun(process.execPath, [tsc, '-b', 'deploy'], { cwd: root });
  }
  const entry = path.join(root, 'deploy', 'dist', 'binaries.js');
  const { ensureBinaries } = await import(new URL(`file://${entry}`).href);
  return ensureBinaries({ log: (m) => say(m) });
}

function checkNode() {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 20 || (major === 20 && minor < 19)) {
    throw new Error(`Node ${process.versions.node} is too old: mailfleet needs Node >= 20.19 (see .nvmrc)`);
  }
}

/** Everything a fresh clone needs before the platform or the tests can run. */
export async function prepare({ root = repoRoot, skipInstall = false, skipBuild = false, skipBinaries = false } = {}) {
  checkNode();
  if (!skipInstall) await install(root);
  if (!skipBuild) {
    await build(root);
    await buildConsole(root);
  }
  if (!skipBinaries) await binaries(root, { buildDeploy: skipBuild });
}

// `node deploy/bin/prepare.mjs [--binaries-only | --skip-install | --skip-build | --skip-binaries]` (CI).
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = new Set(process.argv.slice(2));
  const known = ['--binaries-only', '--skip-install', '--skip-build', '--skip-binaries'];
  const unknown = [...args].filter((a) => !known.includes(a));
  if (unknown.length > 0) {
    process.stderr.write(`[prepare] unknown option(s) ${unknown.join(' ')}; known: ${known.join(' ')}\n`);
    process.exit(2);
  }
  const only = args.has('--binaries-only');
  prepare({
    skipInstall: only || args.has('--skip-install'),
    skipBuild: only || args.has('--skip-build'),
    skipBinaries: args.has('--skip-binaries'),
  }).then(
    () => say('done'),
    (error) => {
      process.stderr.write(`[prepare] ${error.message}\n`);
      process.exit(1);
    },
  );
}
