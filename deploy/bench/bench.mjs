// The measurements behind `npm run bench` (entry: deploy/bin/bench.mjs). Every figure is measured in
// this run against the platform it boots; a part that cannot run is reported as "not available: why".
/* global AbortController, TextEncoder */
import { randomBytes, randomUUID } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { MongoClient } from 'mongodb';
import nodemailer from 'nodemailer';
import { connect } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { api, fmt, platformRss, round, runCli, sinkCount, summarize, table } from './lib.mjs';

const repoRoot = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const say = (message) => process.stderr.write(`[bench] ${message}\n`);
const FAMILIES = ['SEND_EMAIL', 'BATCH_EMAIL', 'READ_EMAIL', 'FEEDBACK_LIST', 'CONTACT', 'BULK_CONTACT', 'DEFAULT'];
/** How long to wait for a backlog (sink deliveries, event arrivals) once the load stopped. */
const DRAIN_LIMIT_MS = 60_000;

const imp = (rel) => import(new URL(`file://${path.join(repoRoot, rel)}`).href);

/** Runs the whole bench; resolves to the process exit code. */
export async function runBench(params) {
  const { startPlatform, fileLogSink } = await imp('deploy/dist/index.js');
  const { startDnsServer } = await imp('services/testkit/dist/dns-server.js');
  const { createTestCa } = await imp('services/testkit/dist/test-ca.js');
  const { startHttpsReceiver } = await imp('services/testkit/dist/https-receiver.js');

  const startedAt = new Date();
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-bench-'));
  const logDir = path.join(dataDir, 'logs');
  const stopper = new AbortController();
  const resources = { platform: undefined, dns: undefined, receiver: undefined, nats: undefined, cannon: undefined };
  let cleaned;
  const cleanup = (keep) =>
    (cleaned ??= (async () => {
      resources.cannon?.stop();
      await resources.nats?.close().catch(() => undefined);
      await resources.receiver?.close().catch(() => undefined);
      await resources.platform?.stop().catch((e) => say(`platform stop failed: ${e.message}`));
      await resources.dns?.close().catch(() => undefined);
      if (keep) say(`data and logs kept in ${dataDir}`);
      else await fsp.rm(dataDir, { recursive: true, force: true });
    })());
  const onSignal = (signal) => {
    if (stopper.signal.aborted) process.exit(130);
    say(`${signal}: stopping the platform`);
    stopper.abort();
    cleanup(params.keep).finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const checkAbort = () => {
    if (stopper.signal.aborted) throw new Error('interrupted');
  };

  const result = {
    startedAt: startedAt.toISOString(),
    machine: {
      cores: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? 'unknown',
      memoryMiB: Math.round(os.totalmem() / 1024 / 1024),
      node: process.version,
      platform: `${os.platform()} ${os.release()} ${os.arch()}`,
      // Other work on the machine skews every figure: the 1/5/15-minute load averages at start and end.
      loadAverageAtStart: os.loadavg().map((l) => round(l)),
    },
    parameters: { ...params, drainLimitMs: DRAIN_LIMIT_MS },
  };

  try {
    // --- boot ------------------------------------------------------------------------------
    const ca = await createTestCa({ dir: path.join(dataDir, 'ca') });
    resources.dns = await startDnsServer();
    say(`starting the platform (data in ${dataDir}, logs in ${logDir})`);
    const bootStart = performance.now();
    resources.platform = await startPlatform({
      ports: 'free',
      dataDir,
      log: fileLogSink(logDir),
      signal: stopper.signal,
      env: {
        DNS_SERVERS: resources.dns.address,
        NODE_EXTRA_CA_CERTS: ca.caFile,
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        LOG_LEVEL: process.env['LOG_LEVEL'] ?? 'warn',
        // Domain verification on the e2e clock (services/testkit/src/e2e-environment.ts).
        DNS_TIMEOUT_MS: '1000',
        DNS_TRIES: '1',
        DOMAIN_VERIFY_POLL_INTERVAL_MS: '250',
        DOMAIN_VERIFY_RETRY_ATTEMPTS: '3',
        DOMAIN_VERIFY_RETRY_BASE_MS: '300',
        DOMAIN_VERIFY_RETRY_MAX_MS: '1000',
        DOMAIN_VERIFY_TEMP_RETRY_BASE_MS: '300',
        DOMAIN_VERIFY_TEMP_RETRY_MAX_MS: '1000',
      },
      onUnexpectedExit: (report) => say(`UNEXPECTED EXIT: ${report.message}`),
    });
    const platform = resources.platform;
    result.bootSeconds = round((performance.now() - bootStart) / 1000, 1);
    say(`platform ready in ${result.bootSeconds} s: ${platform.gatewayUrl}`);
    await sleep(2000);
    result.memoryIdleMiB = platformRss();

    const gw = platform.gatewayUrl;
    const cliEnv = { AUTH_GRPC_ADDR: `127.0.0.1:${platform.ports.services.auth.grpc}` };
    const newTeam = async (name) => {
      const team = JSON.parse(await runCli(repoRoot, ['team', 'create', '--name', name, '--json'], cliEnv));
      const limits = FAMILIES.flatMap((f) => ['--rate-limit', `${f}=1000000`]);
      await runCli(repoRoot, ['team', 'update', '--team', team.teamId, ...limits, '--daily', '100000000', '--monthly=-1'], cliEnv);
      return team;
    };

    const sendTeam = await newTeam('bench-send');
    const eventTeam = await newTeam('bench-events');

    // --- send path -------------------------------------------------------------------------
    const load = { connections: params.connections, duration: params.durationS };
    checkAbort();
    say(`GET /v1/health: ${params.connections} connections for ${params.durationS} s`);
    const health = fromCannon(await cannon(resources, { url: `${gw}/v1/health`, ...load }));
    checkAbort();
    say(`raw insertOne: ${params.connections} concurrent for ${params.durationS} s`);
    const rawInsert = await rawInsertRate(platform.mongoUrl, params, stopper.signal);
    checkAbort();
    const send = await sendPath({ gw, token: sendTeam.token, dns: resources.dns, platform, params, resources, signal: stopper.signal });
    result.sendPath = {
      health,
      rawInsertOne: rawInsert,
      send,
      ratios:
        send.available && send.ok2xxPerSecond > 0
          ? {
              sendOverRawInsert: round(send.ok2xxPerSecond / rawInsert.perSecond, 6),
              sendOverHealth: round(send.ok2xxPerSecond / health.ok2xxPerSecond, 6),
            }
          : null,
    };

    // --- campaign fan-out ------------------------------------------------------------------
    checkAbort();
    const campaigns = await api(gw, 'GET', '/v1/campaigns', { token: sendTeam.token });
    say(`SMTP sink raw accept rate: ${params.smtpMessages} messages over a nodemailer pool`);
    result.campaignFanOut = {
      campaign:
        campaigns.status === 404
          ? { available: false, reason: 'campaigns service not built (GET /v1/campaigns answers 404)' }
          : { available: false, reason: `no campaign driver in the bench yet (GET /v1/campaigns answers ${campaigns.status})` },
      sinkRawAccept: await sinkAcceptRate(platform.smtpUrl, params, stopper.signal),
    };

    // --- event pipeline --------------------------------------------------------------------
    checkAbort();
    resources.receiver = await startHttpsReceiver({ ca });
    result.eventPipeline = await eventPipeline({ gw, team: eventTeam, platform, params, resources, signal: stopper.signal });

    result.memoryEndMiB = platformRss();
    result.finishedAt = new Date().toISOString();
    result.machine.loadAverageAtEnd = os.loadavg().map((l) => round(l));

    const file = path.join(repoRoot, 'bench-results', `bench-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
    await fsp.mkdir(path.dirname(file), { recursive: true });
    await fsp.writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`${render(result)}\n\nJSON: ${path.relative(process.cwd(), file)}\n`);
    await cleanup(params.keep);
    return 0;
  } catch (error) {
    if (!stopper.signal.aborted) {
      say(`failed: ${error.stack ?? error.message}`);
      say(`platform logs: ${logDir}`);
      await cleanup(true);
    }
    return 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

function cannon(resources, opts) {
  return new Promise((resolve, reject) => {
    resources.cannon = autocannon({ ...opts, timeout: 10 }, (err, res) => {
      resources.cannon = undefined;
      if (err) reject(err);
      else resolve(res);
    });
  });
}

function fromCannon(r) {
  return {
    durationS: r.duration,
    connections: r.connections,
    requests: r.requests.total,
    ok2xx: r['2xx'],
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    ok2xxPerSecond: round(r['2xx'] / r.duration, 1),
    latencyMs: { p50: r.latency.p50, p99: r.latency.p99, mean: round(r.latency.average), max: r.latency.max },
  };
}

/** insertOne of an email-sized document at fixed concurrency into a database of its own on the same FerretDB. */
async function rawInsertRate(mongoUrl, params, signal) {
  const client = new MongoClient(mongoUrl, { maxPoolSize: params.connections });
  try {
    const col = client.db('bench_raw').collection('emails');
    await col.insertOne({ warmup: true });
    const html = `<p>${'Hello from the mailfleet bench. '.repeat(16)}</p>`;
    const latencies = [];
    let errors = 0;
    const start = performance.now();
    const deadline = start + params.durationS * 1000;
    await Promise.all(
      Array.from({ length: params.connections }, async () => {
        while (performance.now() < deadline && !signal.aborted) {
          const t = performance.now();
          try {
            await col.insertOne({
              teamId: 'team_bench', from: 'bench@bench.test', to: ['reader@bench.test'], subject: 'bench',
              html, status: 'QUEUED', createdAt: new Date(), outbox: [{ id: randomUUID(), type: 'email.queued' }],
            });
            latencies.push(performance.now() - t);
          } catch {
            errors += 1;
          }
        }
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    await client.db('bench_raw').dropDatabase().catch(() => undefined);
    return {
      durationS: round(seconds, 2), concurrency: params.connections, inserts: latencies.length, errors,
      perSecond: round(latencies.length / seconds, 1), latencyMs: summarize(latencies),
    };
  } finally {
    await client.close();
  }
}

async function sendPath({ gw, token, dns, platform, params, resources, signal }) {
  const notAvailable = (reason) => {
    say(`send path not available: ${reason}`);
    return { available: false, reason };
  };
  // A verified domain, its records published on the bench's DNS server.
  const name = `bench-${randomBytes(4).toString('hex')}.mailfleet-bench.test`;
  const created = await api(gw, 'POST', '/v1/domains', { token, body: { name, region: 'us-east-1' } });
  if (created.status !== 200) return notAvailable(`POST /v1/domains answered ${created.status} ${JSON.stringify(created.body)}`);
  for (const r of created.body.dnsRecords ?? []) {
    if (r.type === 'MX') dns.setRecords(r.name, 'MX', [{ priority: Number(r.priority), exchange: r.value }]);
    else dns.setRecords(r.name, 'TXT', [r.value]);
  }
  await api(gw, 'PUT', `/v1/domains/${created.body.id}/verify`, { token });
  let status = 'unknown';
  for (let i = 0; i < 120 && !signal.aborted; i++) {
    status = (await api(gw, 'GET', `/v1/domains/${created.body.id}`, { token })).body?.status;
    if (status === 'SUCCESS' || status === 'FAILED') break;
    await sleep(250);
  }
  if (status !== 'SUCCESS') return notAvailable(`domain verification ended in ${status}`);

  const body = JSON.stringify({
    from: `Bench <bench@${name}>`,
    to: ['reader@inbox.mailfleet-bench.test'],
    subject: 'mailfleet bench',
    html: `<p>${'Hello from the mailfleet bench. '.repeat(16)}</p>`,
    text: 'Hello from the mailfleet bench.',
  });
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const probe = await api(gw, 'POST', '/v1/emails', { token, body: JSON.parse(body) });
  if (probe.status === 404) return notAvailable(`POST /v1/emails answers 404 (route not registered): ${JSON.stringify(probe.body)}`);
  if (probe.status !== 200) return notAvailable(`POST /v1/emails answers ${probe.status}: ${JSON.stringify(probe.body)}`);

  const mailDir = platform.mailDir;
  await sleep(3000); // let the probe's delivery reach the sink
  const sinkBefore = await sinkCount(mailDir);
  say(`POST /v1/emails: ${params.connections} connections for ${params.durationS} s`);
  const r = fromCannon(await cannon(resources, { url: `${gw}/v1/emails`, method: 'POST', headers, body, connections: params.connections, duration: params.durationS }));
  const loadEnd = performance.now();
  const sinkAtLoadEnd = (await sinkCount(mailDir)) - sinkBefore;
  // Drain: until every accepted email is in the sink, or nothing arrived for 5 s, or the limit.
  let delivered = sinkAtLoadEnd;
  let lastChange = performance.now();
  let drainedMs = null;
  while (!signal.aborted && performance.now() - loadEnd < DRAIN_LIMIT_MS) {
    if (delivered >= r.ok2xx) {
      drainedMs = performance.now() - loadEnd;
      break;
    }
    if (performance.now() - lastChange > 5000) break;
    await sleep(250);
    const now = (await sinkCount(mailDir)) - sinkBefore;
    if (now !== delivered) lastChange = performance.now();
    delivered = now;
  }
  return {
    available: true,
    ...r,
    sink: {
      deliveredDuringLoad: sinkAtLoadEnd,
      deliveredAfterDrain: delivered,
      drainAfterLoadS: drainedMs === null ? null : round(drainedMs / 1000, 1),
      note: drainedMs === null ? 'not every accepted email reached the sink within the drain limit' : 'every accepted email reached the sink',
    },
  };
}

/** Messages per minute the platform's SMTP sink accepts from a pooled nodemailer transport. */
async function sinkAcceptRate(smtpUrl, params, signal) {
  const url = new URL(smtpUrl);
  const maxConnections = 5;
  const transport = nodemailer.createTransport({
    host: url.hostname, port: Number(url.port), secure: false, ignoreTLS: true, pool: true, maxConnections, maxMessages: Infinity,
  });
  const html = `<p>${'Hello from the mailfleet bench. '.repeat(16)}</p>`;
  let next = 0;
  let accepted = 0;
  let failed = 0;
  const start = performance.now();
  try {
    await Promise.all(
      Array.from({ length: maxConnections * 2 }, async () => {
        while (next < params.smtpMessages && !signal.aborted) {
          const i = next++;
          try {
            // Null envelope sender: the mailbox simulator sends no report back for it.
            await transport.sendMail({
              envelope: { from: '', to: [`reader+${i}@inbox.mailfleet-bench.test`] },
              from: 'bench@mailfleet-bench.test', to: `reader+${i}@inbox.mailfleet-bench.test`, subject: `bench ${i}`, html,
            });
            accepted += 1;
          } catch {
            failed += 1;
          }
        }
      }),
    );
  } finally {
    transport.close();
  }
  const seconds = (performance.now() - start) / 1000;
  return {
    messages: params.smtpMessages, pooledConnections: maxConnections, accepted, failed, durationS: round(seconds, 2),
    perMinute: round((accepted / seconds) * 60, 0),
  };
}

async function eventPipeline({ gw, team, platform, params, resources, signal }) {
  const { token, teamId } = team;
  const domain = await api(gw, 'POST', '/v1/domains', { token, body: { name: `events-${randomBytes(4).toString('hex')}.mailfleet-bench.test`, region: 'us-east-1' } });
  const domainId = domain.status === 200 ? domain.body.id : undefined;

  // Webhook arrivals, by event id.
  const webhookAt = new Map();
  resources.receiver.setResponse((request) => {
    const at = Date.now();
    try {
      const id = JSON.parse(request.rawBody.toString('utf8')).id;
      if (!webhookAt.has(id)) webhookAt.set(id, at);
    } catch {
      // not JSON: not one of ours
    }
    return { status: 200 };
  });
  const hook = await api(gw, 'POST', '/v1/webhooks', { token, body: { url: `${resources.receiver.url}/bench`, eventTypes: ['email.delivered'] } });
  const webhookReason = hook.status === 200 ? undefined : `POST /v1/webhooks answered ${hook.status} ${JSON.stringify(hook.body)}`;

  const baseline = await api(gw, 'GET', '/v1/stats', { token });
  const statsReason = baseline.status === 200 ? undefined : `GET /v1/stats answered ${baseline.status}`;
  const baseCount = baseline.body?.totalDelivered ?? 0;

  resources.nats = await connect({ servers: platform.natsUrl });
  const js = jetstream(resources.nats);
  const total = params.eventRate * params.eventDurationS;
  const published = []; // in publish order: {eventId, emailId, at}
  const byEmail = new Map();
  const counterAt = new Array(total).fill(undefined);
  const feedAt = new Map();
  let publishing = true;
  let publishErrors = 0;
  let pollErrors = 0;
  let polls = 0;

  const done = () => published.length === total && counterAt.every((t) => t !== undefined) && feedAt.size === total
    && (webhookReason !== undefined || webhookAt.size === total);
  let giveUpAt = Infinity;
  const poller = (async () => {
    while (!signal.aborted && (publishing || (!done() && Date.now() < giveUpAt))) {
      const tick = Date.now();
      const [stats, feed] = await Promise.all([
        statsReason ? undefined : api(gw, 'GET', '/v1/stats', { token }).catch(() => undefined),
        api(gw, 'GET', '/v1/events?status=DELIVERED&limit=100', { token }).catch(() => undefined),
      ]);
      const at = Date.now();
      polls += 1;
      if (stats?.status === 200) {
        const reflected = Math.min(total, stats.body.totalDelivered - baseCount);
        for (let k = 0; k < reflected; k++) if (counterAt[k] === undefined) counterAt[k] = at;
      } else if (!statsReason) pollErrors += 1;
      if (feed?.status === 200) {
        for (const e of feed.body.events ?? []) if (byEmail.has(e.emailId) && !feedAt.has(e.emailId)) feedAt.set(e.emailId, at);
      } else pollErrors += 1;
      await sleep(Math.max(0, params.pollMs - (Date.now() - tick)));
    }
  })();

  say(`publishing ${total} email.delivered events at ${params.eventRate}/s`);
  const acks = [];
  const t0 = Date.now();
  for (let i = 0; i < total && !signal.aborted; i++) {
    const wait = t0 + (i * 1000) / params.eventRate - Date.now();
    if (wait > 0) await sleep(wait);
    const emailId = `em_bench${randomBytes(8).toString('hex')}`;
    const now = new Date();
    const event = {
      id: `evt_${randomUUID().replace(/-/g, '')}`, type: 'email.delivered', createdAt: now.toISOString(), teamId,
      data: {
        id: emailId, status: 'DELIVERED', to: ['reader@inbox.mailfleet-bench.test'], from: 'Bench <bench@mailfleet-bench.test>',
        subject: `bench event ${i}`, occurredAt: now.toISOString(), ...(domainId ? { domainId } : {}),
      },
    };
    const at = Date.now();
    published.push({ eventId: event.id, emailId, at });
    byEmail.set(emailId, event.id);
    acks.push(js.publish('mailfleet.email.delivered', new TextEncoder().encode(JSON.stringify(event)), { msgID: event.id }).catch(() => {
      publishErrors += 1;
    }));
  }
  const publishSeconds = (Date.now() - t0) / 1000;
  await Promise.all(acks);
  publishing = false;
  giveUpAt = Date.now() + params.drainS * 1000;
  await poller;
  const pollSeconds = (Date.now() - t0) / 1000;

  const lags = (times) => {
    const arrivals = published.map((p, k) => ({ p, at: times(p, k) })).filter((x) => x.at !== undefined);
    return { values: arrivals.map((x) => x.at - x.p.at), last: Math.max(...arrivals.map((x) => x.at)) };
  };
  // Arrivals per second from the first publish to the last arrival: what the path sustains when it falls behind.
  const section = (reason, { values, last }, how) => {
    if (reason) return { available: false, reason };
    return {
      available: true, method: how, arrived: values.length, missing: total - values.length, lagMs: summarize(values),
      arrivalsPerSecond: values.length > 0 ? round(values.length / ((last - t0) / 1000), 1) : null,
    };
  };
  return {
    events: total, ratePerSecond: params.eventRate, publishSeconds: round(publishSeconds, 2), publishErrors, pollIntervalMs: params.pollMs,
    polls, pollErrors, meanPollPeriodMs: polls > 0 ? round((pollSeconds * 1000) / polls, 1) : null, drainLimitS: params.drainS,
    analyticsCounter: section(statsReason, lags((_p, k) => counterAt[k]),
      'GET /v1/stats totalDelivered polled; the k-th published event counts as reflected when the total first reaches k (response arrival time)'),
    analyticsFeed: section(undefined, lags((p) => feedAt.get(p.emailId)),
      'GET /v1/events?status=DELIVERED polled; arrival = first response listing the email id'),
    webhook: section(webhookReason, lags((p) => webhookAt.get(p.eventId)), 'HTTPS receiver; arrival = first request carrying the event id'),
  };
}

function render(r) {
  const rows = [];
  rows.push([`mailfleet bench ${r.startedAt}  (${r.machine.cores} cores ${r.machine.cpuModel}, ${r.machine.memoryMiB} MiB, node ${r.machine.node})`]);
  rows.push(['load average (1/5/15 min)', `${r.machine.loadAverageAtStart.join(' ')} at start, ${r.machine.loadAverageAtEnd.join(' ')} at end`]);
  rows.push(['platform boot', `${fmt(r.bootSeconds)} s`]);
  const sp = r.sendPath;
  rows.push([`Send path (${r.parameters.connections} connections, ${r.parameters.durationS} s each)`]);
  const cannonRow = (c) => `${fmt(c.ok2xxPerSecond)} req/s  p50 ${fmt(c.latencyMs.p50)} ms  p99 ${fmt(c.latencyMs.p99)} ms  (${fmt(c.ok2xx)} ok, ${fmt(c.non2xx)} non-2xx, ${fmt(c.errors)} errors)`;
  rows.push(['POST /v1/emails', sp.send.available ? cannonRow(sp.send) : `not available: ${sp.send.reason}`]);
  if (sp.send.available) {
    rows.push(['  reached the sink', `${fmt(sp.send.sink.deliveredDuringLoad)} during load, ${fmt(sp.send.sink.deliveredAfterDrain)} after drain${sp.send.sink.drainAfterLoadS === null ? ' (not all)' : ` (${sp.send.sink.drainAfterLoadS} s after load)`}`]);
  }
  rows.push(['raw insertOne (FerretDB)', `${fmt(sp.rawInsertOne.perSecond)} /s  p50 ${fmt(sp.rawInsertOne.latencyMs.p50)} ms  p99 ${fmt(sp.rawInsertOne.latencyMs.p99)} ms  (${fmt(sp.rawInsertOne.errors)} errors)`]);
  rows.push(['GET /v1/health', cannonRow(sp.health)]);
  const ratio = (x) => (x === null ? '—' : `${x.toPrecision(3)} (${(x * 100).toPrecision(3)} %)`);
  rows.push(['send / raw insert', sp.ratios ? ratio(sp.ratios.sendOverRawInsert) : 'not available']);
  rows.push(['send / health', sp.ratios ? ratio(sp.ratios.sendOverHealth) : 'not available']);
  const cf = r.campaignFanOut;
  rows.push(['Campaign fan-out']);
  rows.push(['campaign to 10,000 contacts', cf.campaign.available ? `${fmt(cf.campaign.perMinute)} mails/min` : `not available: ${cf.campaign.reason}`]);
  rows.push(['SMTP sink raw accept', `${fmt(cf.sinkRawAccept.perMinute)} mails/min  (${fmt(cf.sinkRawAccept.accepted)} of ${fmt(cf.sinkRawAccept.messages)} in ${fmt(cf.sinkRawAccept.durationS)} s, pool of ${cf.sinkRawAccept.pooledConnections}, ${fmt(cf.sinkRawAccept.failed)} failed)`]);
  const ep = r.eventPipeline;
  rows.push([`Event pipeline (${fmt(ep.events)} email.delivered at ${ep.ratePerSecond}/s, poll every ${ep.pollIntervalMs} ms, measured ${fmt(ep.meanPollPeriodMs)} ms)`]);
  const lagRow = (s) => (s.available ? `p50 ${fmt(s.lagMs.p50)} ms  p99 ${fmt(s.lagMs.p99)} ms  max ${fmt(s.lagMs.max)} ms  ${fmt(s.arrivalsPerSecond)}/s  (${fmt(s.arrived)} arrived, ${fmt(s.missing)} missing after ${ep.drainLimitS} s)` : `not available: ${s.reason}`);
  rows.push(['analytics counter (/v1/stats)', lagRow(ep.analyticsCounter)]);
  rows.push(['analytics feed (/v1/events)', lagRow(ep.analyticsFeed)]);
  rows.push(['webhook receiver', lagRow(ep.webhook)]);
  rows.push(['Memory (RSS MiB: idle after start -> end of run)']);
  const names = [...new Set([...Object.keys(r.memoryIdleMiB), ...Object.keys(r.memoryEndMiB)])];
  let idleSum = 0;
  let endSum = 0;
  for (const n of names) {
    idleSum += r.memoryIdleMiB[n] ?? 0;
    endSum += r.memoryEndMiB[n] ?? 0;
    rows.push([n, `${fmt(r.memoryIdleMiB[n])} -> ${fmt(r.memoryEndMiB[n])}`]);
  }
  rows.push(['total', `${fmt(round(idleSum, 1))} -> ${fmt(round(endSum, 1))}`]);
  return table(rows);
}
