// API fuzzing behind `npm run fuzz` (entry: deploy/bin/fuzz.mjs): schemathesis from PyPI, in a venv of its own,
// against the platform's /v1/openapi.json with a team's FULL key; fails on any 5xx (not_a_server_error) and any
// response that does not match its documented schema (response_schema_conformance).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { api, fmt, round, table } from './lib.mjs';
import { fileStamp, repoRoot, withPlatform } from './platform.mjs';

const say = (message) => process.stderr.write(`[fuzz] ${message}\n`);

export const SCHEMATHESIS_VERSION = '4.32.5';
export const VENV_DIR = path.join(repoRoot, '.data', 'schemathesis-venv');
export const CHECKS = ['not_a_server_error', 'response_schema_conformance'];
const REVOKE = 'DELETE /v1/api-keys/{id}';

function capture(command, args) {
  return new Promise((resolve) => {
    execOut(command, args, (code, out) => resolve({ code, out }));
  });
}
function execOut(command, args, done) {
  let out = '';
  let child;
  try {
    child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    done(127, String(error));
    return;
  }
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  child.once('error', (error) => done(127, String(error)));
  child.once('close', (code) => done(code ?? 1, out));
}
function runInherit(command, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: 'inherit' });
    child.once('error', reject);
    child.once('close', (code) => resolve(code ?? 1));
  });
}

/** `schemathesis` of SCHEMATHESIS_VERSION in .data/schemathesis-venv (python3 -m venv, pip install), installed once. */
export async function ensureSchemathesis() {
  const bin = path.join(VENV_DIR, 'bin', 'schemathesis');
  if (fs.existsSync(bin) && (await capture(bin, ['--version'])).out.includes(SCHEMATHESIS_VERSION)) return bin;
  const python = process.env['PYTHON'] ?? 'python3';
  const version = await capture(python, ['--version']);
  if (version.code !== 0) throw new Error(`${python} is needed to install schemathesis (set PYTHON to another interpreter): ${version.out.trim()}`);
  say(`installing schemathesis ${SCHEMATHESIS_VERSION} from PyPI into ${path.relative(repoRoot, VENV_DIR)} (${version.out.trim()})`);
  if (!fs.existsSync(path.join(VENV_DIR, 'bin', 'python'))) {
    await fsp.mkdir(path.dirname(VENV_DIR), { recursive: true });
    const code = await runInherit(python, ['-m', 'venv', VENV_DIR]);
    if (code !== 0) throw new Error(`${python} -m venv ${VENV_DIR} failed (${code}); on Debian: apt-get install python3-venv`);
  }
  const code = await runInherit(path.join(VENV_DIR, 'bin', 'python'), ['-m', 'pip', 'install', '--quiet', `schemathesis==${SCHEMATHESIS_VERSION}`]);
  if (code !== 0) throw new Error(`pip install schemathesis==${SCHEMATHESIS_VERSION} failed (${code})`);
  return bin;
}

/** Whether this process may make a network namespace of its own (`unshare --net`, normally as root). */
export async function canUnshareNet() {
  return (await capture('unshare', ['--net', 'true'])).code === 0;
}

/**
 * In a fresh network namespace only loopback exists, and it starts down: bring it up. Everything the platform
 * and schemathesis then do stays on this machine, whatever URL a fuzzed webhook names.
 */
export async function loopbackUp() {
  const r = await capture('ip', ['link', 'set', 'lo', 'up']);
  if (r.code !== 0) throw new Error(`ip link set lo up failed: ${r.out.trim()}`);
}

/** Boots the platform, runs schemathesis against it, prints the findings; resolves to the exit code. */
export async function runFuzz(params) {
  const startedAt = new Date();
  const stamp = fileStamp(startedAt);
  const outDir = path.join(repoRoot, 'bench-results');
  await fsp.mkdir(outDir, { recursive: true });
  const logFile = path.join(outDir, `fuzz-${stamp}.log`);
  const result = { startedAt: startedAt.toISOString(), schemathesis: SCHEMATHESIS_VERSION, parameters: { ...params }, machine: { cores: os.cpus().length, node: process.version } };

  return withPlatform({ tag: 'fuzz', keep: params.keep, say }, async (session) => {
    const { gw } = session;
    const team = await session.newTeam('fuzz');
    result.seeded = await seed(session, team.token);
    say(`seeded: ${Object.entries(result.seeded).map(([k, v]) => `${k} ${v}`).join(', ')}`);
    const reportDir = path.join(session.dataDir, 'schemathesis');
    await fsp.mkdir(reportDir, { recursive: true });
    say(`schemathesis against ${gw}/v1/openapi.json: checks ${CHECKS.join(', ')}, at most ${params.maxExamples} examples per operation, seed ${params.seed}, ${params.workers} workers`);
    if (params.exclude.length) say(`excluded: ${params.exclude.join(', ')}`);
    const log = fs.createWriteStream(logFile);
    const t0 = Date.now();
    result.passes = [];
    const runPass = async (label, filter, seedValue) => {
      session.checkAbort();
      const n = result.passes.length + 1;
      const junit = path.join(reportDir, `junit-${n}.xml`);
      const args = [
        'run', `${gw}/v1/openapi.json`,
        '--url', gw,
        '--checks', CHECKS.join(','),
        '--max-examples', String(params.maxExamples),
        '--workers', String(params.workers),
        '--seed', String(seedValue),
        '--header', `Authorization: Bearer ${team.token}`,
        '--request-timeout', '30',
        '--generation-database', 'none',
        '--report', 'junit',
        '--report-junit-path', junit,
        '--no-color',
        ...(params.phases ? ['--phases', params.phases] : []),
        ...filter,
        ...params.extra,
      ];
      say(`pass ${n}: ${label}`);
      log.write(`\n===== pass ${n}: ${label} (seed ${seedValue})\n`);
      const code = await new Promise((resolve) => {
        // cwd: the temp dir, so nothing (.hypothesis, reports) lands in the repository.
        const child = spawn(params.bin, args, { cwd: reportDir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PYTHONUNBUFFERED: '1' } });
        const forward = (d) => {
          process.stdout.write(d);
          log.write(d);
        };
        child.stdout.on('data', forward);
        child.stderr.on('data', forward);
        const timer = setTimeout(() => {
          say(`time limit of ${params.timeoutS} s reached: stopping schemathesis`);
          result.timedOut = true;
          child.kill('SIGTERM');
          setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
        }, Math.max(params.timeoutS * 1000 - (Date.now() - t0), 1000));
        session.defer(() => child.kill('SIGKILL'));
        child.once('close', (c, signal) => {
          clearTimeout(timer);
          resolve(c ?? (signal ? 128 : 1));
        });
      });
      const operations = fs.existsSync(junit) ? parseJunit(await fsp.readFile(junit, 'utf8')) : [];
      await fsp.copyFile(junit, path.join(outDir, `fuzz-${stamp}.junit-${n}.xml`)).catch(() => undefined);
      result.passes.push({ label, seed: seedValue, exitCode: code, operations });
      return operations;
    };

    // schemathesis reuses ids it saw in responses: given GET /v1/api-keys it revokes the very key it runs with, and
    // every later request is a 401. So that operation runs in a pass of its own, last.
    const byName = new Map();
    for (const o of await runPass('every operation but DELETE /v1/api-keys/{id}', [...params.exclude, REVOKE].flatMap((e) => ['--exclude-name', e]), params.seed)) byName.set(o.operation, o);
    // An operation schemathesis itself failed on (a Runtime Error of the tool, not a finding about the API) is
    // tried once more alone with the next seed.
    const toolErrors = [...byName.values()].filter((o) => o.errors.length > 0 && o.failures.length === 0);
    if (toolErrors.length > 0 && !result.timedOut && params.extra.length === 0) {
      for (const o of await runPass(`again with seed ${params.seed + 1}, where schemathesis failed: ${toolErrors.map((t) => t.operation).join(', ')}`,
        toolErrors.flatMap((t) => ['--include-name', t.operation]), params.seed + 1)) {
        byName.set(o.operation, { ...o, retried: true });
      }
    }
    if (!result.timedOut && params.extra.length === 0) {
      for (const o of await runPass(`${REVOKE} (last: it may revoke the key in use)`, ['--include-name', REVOKE], params.seed)) byName.set(o.operation, o);
    }
    await new Promise((resolve) => log.end(resolve));
    result.seconds = round((Date.now() - t0) / 1000, 1);
    result.operations = [...byName.values()];
    const failing = result.operations.filter((o) => o.failures.length > 0);
    result.failingOperations = failing.length;
    result.untestedOperations = result.operations.filter((o) => o.failures.length === 0 && o.errors.length > 0).length;
    // Findings about the API fail the run; an operation the tool could not test is reported, not failed.
    result.passed = failing.length === 0 && !result.timedOut && result.passes.length > 0;
    const file = path.join(outDir, `fuzz-${stamp}.json`);
    await fsp.writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`\n${render(result)}\n\nJSON: ${path.relative(process.cwd(), file)}  log: ${path.relative(process.cwd(), logFile)}\n`);
    return result.passed ? 0 : 1;
  });
}

/**
 * One of each resource, so that the ids schemathesis reads from list responses lead somewhere and the operations on
 * one resource get past 404: a verified domain, an email (and its events), a template, a contact book with a
 * contact, a draft campaign, a suppression, a webhook to a loopback receiver.
 */
async function seed(session, token) {
  const { gw } = session;
  const done = {};
  const step = async (name, fn) => {
    try {
      const r = await fn();
      done[name] = r === undefined || r.status === 200 ? 'ok' : `answered ${r.status}`;
      return r;
    } catch (error) {
      done[name] = `failed: ${error.message}`;
      return undefined;
    }
  };
  const domain = await session.verifiedDomain(token, 'fuzz');
  done.domain = domain.available ? 'ok' : domain.reason;
  if (domain.available) {
    await step('email', () => api(gw, 'POST', '/v1/emails', { token, body: { from: `Fuzz <fuzz@${domain.name}>`, to: 'reader@inbox.mailfleet-fuzz.test', subject: 'seed', text: 'seed' } }));
  }
  await step('template', () => api(gw, 'POST', '/v1/templates', { token, body: { name: 'seed', subject: 'Hi {{name}}', html: '<p>{{name}}</p>' } }));
  const book = await step('contact book', () => api(gw, 'POST', '/v1/contactBooks', { token, body: { name: 'seed' } }));
  if (book?.status === 200) {
    await step('contact', () => api(gw, 'POST', `/v1/contactBooks/${book.body.id}/contacts`, { token, body: { email: 'contact@inbox.mailfleet-fuzz.test', firstName: 'Seed' } }));
    if (domain.available) {
      await step('campaign', () => api(gw, 'POST', '/v1/campaigns', {
        token, body: { name: 'seed', from: `fuzz@${domain.name}`, subject: 'seed', contactBookId: book.body.id, html: '<a href="{{service_unsubscribe_url}}">u</a>' },
      }));
    }
  }
  await step('suppression', () => api(gw, 'POST', '/v1/suppressions', { token, body: { email: 'suppressed@inbox.mailfleet-fuzz.test', reason: 'MANUAL' } }));
  const receiver = await session.startReceiver();
  await step('webhook', () => api(gw, 'POST', '/v1/webhooks', { token, body: { url: `${receiver.url}/fuzz`, eventTypes: ['email.sent', 'domain.created'] } }));
  return done;
}

const unescapeXml = (s) => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&#10;/g, '\n').replace(/&#13;/g, '\r').replace(/&amp;/g, '&');

/** The JUnit report: one testcase per operation, with its failure/error texts. */
export function parseJunit(xml) {
  const out = [];
  const re = /<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g;
  for (let m = re.exec(xml); m; m = re.exec(xml)) {
    const name = unescapeXml(/\bname="([^"]*)"/.exec(m[1])?.[1] ?? '?');
    const body = m[2] ?? '';
    const failures = []; // findings: a check failed against the API's answer
    const errors = []; // schemathesis could not run the operation
    const fre = /<(failure|error)\b([^>]*?)(?:\/>|>([\s\S]*?)<\/\1>)/g;
    for (let f = fre.exec(body); f; f = fre.exec(body)) {
      const message = unescapeXml(/\bmessage="([^"]*)"/.exec(f[2])?.[1] ?? '');
      (f[1] === 'failure' ? failures : errors).push(unescapeXml(f[3] ?? message).trim());
    }
    const skipped = /<skipped\b/.test(body);
    out.push({ operation: name, failures, errors, skipped });
  }
  return out;
}

/** The lines of a finding worth a table row: the checks that failed ("- ..."), the status line, the curl. */
function findingSummary(text) {
  const lines = text.split('\n').map((l) => l.trim()).filter(Boolean);
  const checks = [...new Set(lines.filter((l) => /^- /.test(l)).map((l) => l.slice(2)))];
  const status = lines.find((l) => /^\[\d{3}\]/.test(l));
  const curl = lines.find((l) => l.startsWith('curl '));
  return [checks.join('; '), status, curl].filter(Boolean).join(' | ');
}

function render(r) {
  const rows = [];
  rows.push([`mailfleet fuzz ${r.startedAt}  (schemathesis ${r.schemathesis}, checks ${CHECKS.join(' + ')}, ${r.parameters.maxExamples} examples/operation, seed ${r.parameters.seed})`]);
  const failing = r.operations.filter((o) => o.failures.length > 0);
  const untested = r.operations.filter((o) => o.failures.length === 0 && o.errors.length > 0);
  const ops = r.operations.filter((o) => /^[A-Z]+ \//.test(o.operation)).length;
  rows.push(['operations', `${fmt(ops)} tested${ops < r.operations.length ? ' (+ stateful scenarios)' : ''}, ${fmt(failing.length)} with findings, ${fmt(untested.length)} not tested (schemathesis error)  (${fmt(r.seconds)} s in ${r.passes.length} passes${r.timedOut ? ', stopped at the time limit' : ''})`]);
  if (failing.length > 0) {
    rows.push(['Findings (each failing test case: check | response | reproduction; the full text is in the log)']);
    for (const o of failing) for (const [i, f] of o.failures.entries()) rows.push([i === 0 ? o.operation : '', findingSummary(f).slice(0, 400)]);
  }
  if (untested.length > 0) {
    rows.push(['Not tested: schemathesis failed while generating cases (not a finding about the API)']);
    for (const o of untested) rows.push([o.operation, `${o.errors[0].split('\n').map((l) => l.trim()).filter(Boolean).slice(0, 2).join(': ').slice(0, 200)}${o.retried ? ' (also with the next seed)' : ''}`]);
  }
  rows.push(['result', r.passed ? 'PASS: no 5xx, every response matches its schema' : `FAIL: ${failing.length ? `${failing.length} operations with findings` : 'no pass completed'}${r.timedOut ? ' (time limit)' : ''}`]);
  return table(rows);
}
