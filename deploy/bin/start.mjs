// `npm start`: install what is missing, build, then run the whole platform until Ctrl-C.
/* global AbortController, AbortSignal, fetch, setInterval */
import fs from 'node:fs';
import path from 'node:path';
import { prepare, repoRoot } from './prepare.mjs';

const say = (message) => process.stderr.write(`[mailfleet] ${message}\n`);

try {
  await prepare();
} catch (error) {
  say(error.message);
  process.exit(1);
}

const { startPlatform } = await import(new URL(`file://${path.join(repoRoot, 'deploy', 'dist', 'platform.js')}`).href);

const controller = new AbortController();
let platform;
let stopping = false;
const onSignal = (signal) => {
  if (stopping) {
    // A second Ctrl-C: the 'exit' hook SIGKILLs whatever is left.
    say(`${signal} again: killing everything`);
    process.exit(130);
  }
  stopping = true;
  if (!platform) {
    controller.abort();
    return;
  }
  say(`${signal}: stopping`);
  platform.stop().then(
    () => {
      say('stopped');
      process.exit(0);
    },
    (error) => {
      say(`stop failed: ${error.message}`);
      process.exit(1);
    },
  );
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
// A closed terminal: our children run in process groups of their own and would not get it.
process.on('SIGHUP', onSignal);

// `npm start` runs us under npm and sh. A SIGTERM sent to npm alone (a process manager,
// `timeout`) ends npm without reaching us, which would leave the platform orphaned; so
// when npm or sh goes away, stop as if signalled.
const ancestors = ancestorPids(2);
const watchdog = setInterval(() => {
  if (!stopping && ancestors.some((pid) => !isAlive(pid))) onSignal('parent process exited');
}, 1000);
watchdog.unref();

function ancestorPids(depth) {
  const pids = [];
  let pid = process.ppid;
  for (let i = 0; i < depth && pid > 1; i++) {
    pids.push(pid);
    try {
      // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may contain spaces, so split after ')'.
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      pid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch {
      break; // no /proc (macOS): the direct parent is still watched
    }
  }
  return pids;
}

function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

const port = process.env.PORT ? Number(process.env.PORT) : undefined;
if (port !== undefined && !(Number.isInteger(port) && port > 0 && port < 65536)) {
  say(`PORT must be a port number, got ${process.env.PORT}`);
  process.exit(1);
}

try {
  // Local mode: with its own SMTP sink and no DNS_SERVERS, the platform also runs a DNS server
  // where domains publish their records (startPlatform decides; SMTP_URL or DNS_SERVERS turn it off).
  platform = await startPlatform({ ports: 'default', ...(port ? { port } : {}), signal: controller.signal, localMode: true });
} catch (error) {
  if (controller.signal.aborted) {
    say('stopped before it was ready');
    process.exit(0);
  }
  say(error.message);
  process.exit(1);
}
if (stopping) {
  await platform.stop();
  process.exit(0);
}

say(`ready: gateway on ${platform.gatewayUrl}`);
say(`MongoDB ${platform.mongoUrl} · NATS ${platform.natsUrl} · SMTP ${platform.smtpUrl}${platform.mailDir ? ` (mail in ${platform.mailDir})` : ''}`);
process.stderr.write(`${await whatNext(platform)}\n`);
say('Ctrl-C stops everything');

/** The short block a newcomer reads after start-up: where things are and the first commands. */
async function whatNext(p) {
  const base = p.gatewayUrl;
  const lines = ['', 'What next:', `  API          ${base}/v1  (docs: ${base}/docs)`];
  if (await serves(`${base}/`)) lines.push(`  console      ${base}/`);
  lines.push('  a team       npx mailfleet team create --name "Acme" --json   (prints its teamId and API key)');
  if (p.localDns) {
    lines.push(
      '  first email  README.md, section "First email": paste its block into a second terminal',
      '  dev inbox    npx mailfleet inbox   (--help lists the bounce@/softbounce@/complaint@ test addresses)',
      '',
      `LOCAL MODE: domains verify against a local DNS server (${p.localDns.address}) where mailfleet publishes`,
      `their records; mail goes to the embedded SMTP sink (${shortPath(p.mailDir)}), nowhere else.`,
      'Set SMTP_URL or DNS_SERVERS to run without it.',
    );
  }
  lines.push('');
  return lines.join('\n');
}

function shortPath(dir) {
  const relative = path.relative(process.cwd(), dir);
  return relative && !relative.startsWith('..') ? relative : dir;
}

async function serves(url) {
  try {
    const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(2000) });
    await res.body?.cancel();
    return res.status >= 200 && res.status < 400;
  } catch {
    return false;
  }
}
