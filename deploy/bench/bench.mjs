// The measurements behind `npm run bench` (entry: deploy/bin/bench.mjs). Every figure is measured in
// this run against the platform it boots; a part that cannot run is reported as "not available: why".
/* global TextEncoder */
import { randomBytes, randomUUID } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { MongoClient } from 'mongodb';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { createAckedPublisher } from '@mailfleet/kit';
import { CAMPAIGN_ENV, campaignAddresses, campaignFigures, createBook, followCampaign, startCampaign } from './campaign.mjs';
import { api, apiSafe, cpuBetween, fmt, mapLimit, platformCpuSeconds, platformRss, round, sinkCount, sinkWatcher, summarize, table } from './lib.mjs';
import { fileStamp, repoRoot, withPlatform } from './platform.mjs';
import { pipelinedSend } from './smtp-client.mjs';
import { idleRate, phaseOps, pollCost, storeStats } from './storage.mjs';

const say = (message) => process.stderr.write(`[bench] ${message}\n`);
/** How long to wait for a backlog (sink deliveries, event arrivals) once the load stopped. */
const DRAIN_LIMIT_MS = 60_000;
/** Emails per POST /v1/emails/batch request (the API's maximum). */
const BATCH_ITEMS = 100;
/** How often the storage phases ask the API whether the phase is over: rarely, since each ask costs the store too. */
const OPS_POLL_MS = 1000;
/** Calls of each poll the bench makes during a storage phase, to learn what one costs the store. */
const POLL_COST_SAMPLES = 20;
/** The events phase stops polling the feed once its polls have seen nothing new for this long (see feedSettled). */
const FEED_SETTLE_MS = 10_000;

/** Issue 18's targets ("What `npm run bench` must show"). */
export const TARGETS = {
  singleSendOpsPerEmail: 4,
  campaignOpsPerEmail: 3,
  sendOverRawInsert: 0.5,
  sendP99Ms: 100,
  batchOverRawInsert: 2,
  campaignPerMinute: 30_000,
  sinkOverCampaign: 5,
  eventLagP99Ms: 2000,
  rssIdleMiB: 1.2 * 1024,
  rssEndMiB: 1.6 * 1024,
};

/** Runs the whole bench; resolves to the process exit code. */
export async function runBench(params) {
  const startedAt = new Date();
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

  /** Writes the run's JSON (`bench[-<only>]-<time>.json`) and prints `text`, then where the JSON is. */
  const saveAndPrint = async (res, only, text) => {
    res.finishedAt = new Date().toISOString();
    const file = path.join(repoRoot, 'bench-results', `bench-${only ? `${only}-` : ''}${fileStamp(startedAt)}.json`);
    await fsp.mkdir(path.dirname(file), { recursive: true });
    await fsp.writeFile(file, `${JSON.stringify(res, null, 2)}\n`);
    process.stdout.write(`${text}\nJSON: ${path.relative(process.cwd(), file)}\n`);
  };

  return withPlatform({ tag: 'bench', keep: params.keep, env: CAMPAIGN_ENV, say, ferretdbStats: true }, async (session) => {
    const { platform, gw, signal, checkAbort } = session;
    const resources = { nats: undefined, cannon: undefined };
    session.defer(() => resources.nats?.close());
    session.defer(() => resources.cannon?.stop());
    result.bootSeconds = session.bootSeconds;
    await sleep(2000);
    result.memoryIdleMiB = platformRss();
    resources.nats = await connect({ servers: platform.natsUrl });

    const sendTeam = await session.newTeam('bench-send');
    const eventTeam = await session.newTeam('bench-events');
    if (params.only !== 'events' && params.only !== 'campaign') result.suppressionList = { send: await fillSuppressions({ gw, token: sendTeam.token, count: params.suppressions, signal }) };

    if (params.only === 'events') {
      // --only events: the event pipeline alone, on a platform with nothing else to do.
      result.eventPipeline = await eventPhase({ gw, team: eventTeam, params, resources, session, signal });
      result.memoryEndMiB = platformRss();
      result.machine.loadAverageAtEnd = os.loadavg().map((l) => round(l));
      result.targets = [];
      eventTargetChecks(result, (id, what, value, target, ok) => result.targets.push({ id, what, value, target, pass: value === null || value === undefined ? null : ok(value) }));
      await saveAndPrint(result, 'events', `${renderEventsOnly(result)}\n`);
      return 0;
    }

    // --- storage operations per single send -------------------------------------------------
    checkAbort();
    const { NON_STORAGE_COMMANDS } = await import(new URL(`file://${path.join(repoRoot, 'services/testkit/dist/storage-ops.js')}`).href);
    const ops = {
      stats: storeStats({ file: session.ferretdbStatsFile, nonStorage: NON_STORAGE_COMMANDS, excludeDbs: ['bench_raw'] }),
      idle: undefined,
      statsPollCost: undefined,
    };
    say('storage operations: the idle background, then one single send phase');
    ops.idle = await idleRate(ops.stats, signal);

    if (params.only === 'campaign') {
      // --only campaign: the fan-out alone (with its storage operations and CPU per process), nothing queued before it.
      const statsPoll = () => apiSafe(gw, 'GET', '/v1/stats', { token: sendTeam.token });
      ops.statsPollCost = await pollCost(ops.stats, ops.idle, statsPoll, POLL_COST_SAMPLES, signal);
      const fanOut = await campaignFanOut({ session, params, ops, nats: resources.nats, sendBacklog: 0 });
      result.campaignFanOut = { campaign: fanOut.section };
      result.storageOps = { idlePerSecond: ops.idle.perSecond, idleWindowS: ops.idle.seconds };
      result.storageOps.campaign = fanOut.storageOps ?? { available: false, reason: fanOut.section.reason };
      result.memoryEndMiB = platformRss();
      const c = fanOut.section;
      await saveAndPrint(result, 'campaign', `campaign to ${fmt(c.contacts)}: ${fmt(c.perMinute)} mails/min (${fmt(c.inSink)} in the sink, first after ${fmt(c.firstMessageS)} s, last after ${fmt(c.lastMessageS)} s, COMPLETED after ${fmt(c.completedS)} s; ${c.outcome})\n`
        + `storage operations per email: ${fmt(result.storageOps.campaign.perEmail)}\n`
        + cpuLine(c.cpu, 'mail'));
      return 0;
    }
    result.storageOps = { idlePerSecond: ops.idle.perSecond, idleWindowS: ops.idle.seconds };
    if (params.only === 'send') {
      // --only send: the raw insertOne rate and POST /v1/emails beside it (with the CPU of each process), nothing else.
      say(`raw insertOne: ${params.connections} concurrent for ${params.durationS} s`);
      const rawInsert = await rawInsertRate(platform.mongoUrl, params, signal);
      checkAbort();
      const send = await sendPath({ gw, token: sendTeam.token, session, platform, params, resources, signal });
      result.sendPath = { rawInsertOne: rawInsert, send: { ...send, waitForBacklog: undefined } };
      await saveAndPrint(result, 'send', `raw insertOne: ${fmt(rawInsert.perSecond)} /s\n`
        + (send.available ? `POST /v1/emails: ${cannonRow(send)}; ${fmt(round((100 * send.ok2xxPerSecond) / rawInsert.perSecond, 2))} % of raw insertOne\n` : `POST /v1/emails not available: ${send.reason}\n`)
        + cpuLine(send.cpu, 'accepted email')
        + (send.warmup ? `warm-up before it (the path's first use, no target): ${cannonRow(send.warmup)}\n${cpuLine(send.warmup.cpu, 'accepted email')}` : ''));
      return 0;
    }
    if (params.only === 'batch') {
      // --only batch: the raw insertOne rate and POST /v1/emails/batch beside it (with the CPU of each process), nothing else.
      say(`raw insertOne: ${params.connections} concurrent for ${params.durationS} s`);
      const rawInsert = await rawInsertRate(platform.mongoUrl, params, signal);
      checkAbort();
      const domain = await session.verifiedDomain(sendTeam.token, 'bench');
      const batch = domain.available
        ? await batchSend({ gw, token: sendTeam.token, domainName: domain.name, params, resources })
        : { available: false, reason: domain.reason };
      result.sendPath = { rawInsertOne: rawInsert, batch };
      await saveAndPrint(result, 'batch', `raw insertOne: ${fmt(rawInsert.perSecond)} /s\n`
        + (batch.available ? `POST /v1/emails/batch: ${cannonRow(batch)}; ${fmt(batch.acceptedEmailsPerSecond)} emails/s, ${fmt(round(batch.acceptedEmailsPerSecond / rawInsert.perSecond, 3))}× raw insertOne\n` : `POST /v1/emails/batch not available: ${batch.reason}\n`)
        + cpuLine(batch.cpu, 'accepted email'));
      return 0;
    }
    result.storageOps.singleSend = await singleSendOps({ session, ops, params, nats: resources.nats });

    // --- send path -------------------------------------------------------------------------
    const load = { connections: params.connections, duration: params.durationS };
    checkAbort();
    say(`GET /v1/health: ${params.connections} connections for ${params.durationS} s`);
    const health = fromCannon(await cannon(resources, { url: `${gw}/v1/health`, ...load }));
    checkAbort();
    say(`raw insertOne: ${params.connections} concurrent for ${params.durationS} s`);
    const rawInsert = await rawInsertRate(platform.mongoUrl, params, signal);
    checkAbort();
    const send = await sendPath({ gw, token: sendTeam.token, session, platform, params, resources, signal });
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
    // The send load's mail still queued would be delivered (and its storage operations counted) during the
    // campaign: let it reach the sink first (until nothing arrives for --drain seconds).
    checkAbort();
    if (send.available) send.sink.beforeCampaign = await send.waitForBacklog(params.drainS * 1000);
    say(`SMTP sink raw accept rate: ${params.smtpMessages} messages over 10 pipelined connections`);
    const sinkRawAccept = await sinkAcceptRate(platform.smtpUrl, params, signal);
    checkAbort();
    const fanOut = await campaignFanOut({
      session, params, ops, nats: resources.nats,
      sendBacklog: send.available ? Math.max(0, send.ok2xx - send.sink.beforeCampaign.delivered) : 0,
    });
    result.campaignFanOut = { campaign: fanOut.section, sinkRawAccept };
    result.storageOps.campaign = fanOut.storageOps ?? { available: false, reason: fanOut.section.reason };

    // --- event pipeline --------------------------------------------------------------------
    checkAbort();
    // The campaign's own events (several per mail) are still being consumed: measured lags would be
    // the time to work off that backlog. Wait until every consumer of the event stream is idle.
    result.campaignEventBacklog = await consumersIdle(resources.nats, undefined, params.drainS * 1000, signal);
    // A counter still short after the wait above is read once more now that the event consumers are idle: slow, or lost?
    const campaign = result.campaignFanOut.campaign;
    if (campaign.available && campaign.counters && campaign.counters.delivered < campaign.contacts) {
      const c = await fanOut.readCampaign();
      if (c.status === 200) campaign.deliveredCounterAfterEventsConsumed = c.body.delivered;
    }
    result.eventPipeline = await eventPhase({ gw, team: eventTeam, params, resources, session, signal });

    // --- batch send ------------------------------------------------------------------------
    // Last: its emails (tens of thousands) are delivered long after the load, which would skew every phase after it.
    checkAbort();
    const batch = await batchSend({ gw, token: sendTeam.token, domainName: send.domainName, params, resources });
    result.sendPath.batch = batch;
    result.sendPath.ratios = {
      ...result.sendPath.ratios,
      batchAcceptedOverRawInsert: batch.available && rawInsert.perSecond > 0 ? round(batch.acceptedEmailsPerSecond / rawInsert.perSecond, 3) : null,
    };

    result.memoryEndMiB = platformRss();
    result.machine.loadAverageAtEnd = os.loadavg().map((l) => round(l));
    result.targets = targetChecks(result);
    await saveAndPrint(result, undefined, `${render(result)}\n`);
    return 0;
  });
}

/**
 * Puts `count` addresses on a team's suppression list through POST /v1/suppressions (20 at a time), on a domain no
 * phase sends to: a list of that size is then what each check of the team's sends looks through.
 */
async function fillSuppressions({ gw, token, count, signal }) {
  if (count === 0) return undefined;
  say(`suppression list: adding ${count} addresses no phase sends to`);
  const t0 = performance.now();
  await mapLimit(Array.from({ length: count }, (_, i) => i), 20, async (i) => {
    if (signal.aborted) return;
    const r = await api(gw, 'POST', '/v1/suppressions', { token, body: { email: `kept-away-${i}@suppressed.mailfleet-bench.test`, reason: 'MANUAL' } });
    if (r.status !== 200) throw new Error(`POST /v1/suppressions answered ${r.status}: ${JSON.stringify(r.body)}`);
  });
  const seconds = round((performance.now() - t0) / 1000, 1);
  say(`suppression list: ${count} addresses in ${seconds} s`);
  return { entries: count, seconds };
}

/**
 * A campaign to a book of params.campaignContacts through the public API: a team, a verified domain, the book
 * filled with the bulk endpoint, then POST /v1/campaigns with sendNow, batchSize 100,000 and the smallest window the API allows,
 * followed until every contact's message is in the sink and the campaign is COMPLETED (or the stall/timeout limit).
 * Resolves to the report's section and, when it ran, a way to read the campaign again later.
 */
async function campaignFanOut({ session, params, ops, nats, sendBacklog }) {
  const { gw, platform, signal } = session;
  const notAvailable = (reason) => {
    say(`campaign fan-out not available: ${reason}`);
    return { section: { available: false, reason } };
  };
  const team = await session.newTeam('bench-campaign');
  const probe = await api(gw, 'GET', '/v1/campaigns', { token: team.token });
  if (probe.status !== 200) return notAvailable(`GET /v1/campaigns answers ${probe.status} ${JSON.stringify(probe.body)}`);
  const domain = await session.verifiedDomain(team.token, 'campaign');
  if (!domain.available) return notAvailable(domain.reason);
  const suppressionList = await fillSuppressions({ gw, token: team.token, count: params.suppressions, signal });
  const { addresses } = campaignAddresses(params.campaignContacts, 'campaign');
  say(`campaign: storing ${params.campaignContacts} contacts (bulk, 1,000 per request)`);
  const book = await createBook({ gw, token: team.token, addresses, say, signal });
  const watcher = sinkWatcher(platform.mailDir);
  await watcher.skipExisting();
  // Storage operations from sendNow on (the contacts are stored already, as they would be for a real campaign),
  // once the contacts' own events are consumed.
  await consumersIdle(nats, undefined, params.drainS * 1000, signal, 'the contacts');
  const before = await ops.stats.snapshot(Date.now(), signal);
  const cpuBefore = platformCpuSeconds();
  const started = await startCampaign({ gw, token: team.token, from: `Bench News <news@${domain.name}>`, bookId: book.bookId, name: 'bench fan-out' });
  say(`campaign to ${book.stored} contacts: sendNow, batchSize ${started.batchSize}, window ${started.batchWindowMinutes} min`);
  const follow = followCampaign({
    gw, token: team.token, campaignId: started.id, addresses, watcher, startedAtMs: started.startedAtMs,
    stallMs: params.drainS * 1000, timeoutMs: params.campaignTimeoutS * 1000, signal, say,
  });
  const readCampaign = () => api(gw, 'GET', `/v1/campaigns/${started.id}`, { token: team.token });
  const outcome = await follow.done;
  // CPU each process spent from sendNow to the last message in the sink: on 2 cores, the campaign's real budget.
  const cpu = cpuBetween(cpuBefore, platformCpuSeconds(), follow.state.distinct || addresses.length);
  const figures = campaignFigures(follow.state, { contacts: addresses.length, startedAtMs: started.startedAtMs, outcome });
  // The campaign's own delivered counter (the campaigns service's consumer of email.delivered) catching up:
  // after that the event consumers are idle again before the event pipeline is measured.
  let countersS = null;
  let counterReads = 0;
  if (outcome === 'complete') {
    const t0 = Date.now();
    while (!signal.aborted && Date.now() - t0 < params.drainS * 1000) {
      const c = await readCampaign();
      counterReads += 1;
      if (c.status === 200) {
        figures.counters = Object.fromEntries(['total', 'sent', 'delivered', 'bounced', 'complained'].map((k) => [k, c.body[k]]));
        if (c.body.delivered >= addresses.length) {
          countersS = round((Date.now() - follow.state.lastAtMs) / 1000, 1);
          break;
        }
      }
      await sleep(500);
    }
  }
  const section = {
    available: true, ...figures, batchSize: started.batchSize, batchWindowMinutes: started.batchWindowMinutes, bookSeconds: book.seconds, deliveredCounterAfterLastMessageS: countersS,
    sendPathBacklogAtStart: sendBacklog,
    ...(suppressionList ? { suppressionList } : {}),
    cpu,
  };

  // Every email counted in analytics too, and every consumer done with the campaign's events, before the "after" snapshot.
  const counted = await analyticsCounted({ gw, token: team.token, want: addresses.length, stallMs: params.drainS * 1000, signal });
  const idle = await consumersIdle(nats, undefined, params.drainS * 1000, signal, 'the campaign');
  const after = await ops.stats.snapshot(Date.now(), signal);
  const campaignPollCost = await pollCost(ops.stats, ops.idle, readCampaign, POLL_COST_SAMPLES, signal);
  const campaignReads = follow.state.polls + counterReads;
  const delivered = section.counters?.delivered ?? 0;
  const storageOps = {
    available: true,
    complete: outcome === 'complete' && delivered >= addresses.length && counted.delivered >= addresses.length,
    campaignDeliveredCounter: delivered,
    analyticsDelivered: counted.delivered,
    consumersIdle: idle,
    benchPolls: {
      'GET /v1/campaigns/{id}': { count: campaignReads, opsPerPoll: campaignPollCost.perPoll },
      'GET /v1/stats': { count: counted.polls, opsPerPoll: ops.statsPollCost.perPoll },
    },
    ...phaseOps({
      a: before, b: after, emails: addresses.length, idle: ops.idle,
      polls: [{ count: campaignReads, cost: campaignPollCost }, { count: counted.polls, cost: ops.statsPollCost }],
    }),
  };
  say(`campaign: ${storageOps.perEmail} storage operations per email`);
  return { section, readCampaign, storageOps };
}

/**
 * Polls GET /v1/stats (every OPS_POLL_MS) until the team's totalDelivered reaches `want`, or it stops moving
 * for `stallMs`. Resolves to {delivered, polls, seconds}.
 */
async function analyticsCounted({ gw, token, want, stallMs, signal }) {
  const t0 = Date.now();
  let delivered = -1;
  let polls = 0;
  let lastChange = Date.now();
  while (!signal.aborted) {
    const r = await apiSafe(gw, 'GET', '/v1/stats', { token });
    polls += 1;
    const now = r.status === 200 ? r.body.totalDelivered : delivered;
    if (now !== delivered) lastChange = Date.now();
    delivered = now;
    if (delivered >= want || Date.now() - lastChange > stallMs) break;
    await sleep(OPS_POLL_MS);
  }
  return { delivered: Math.max(0, delivered), polls, seconds: round((Date.now() - t0) / 1000, 1) };
}

/**
 * Storage operations per single send: `--ops-emails` POST /v1/emails (one recipient each, `--connections` at a
 * time) by a team of their own, from the first POST until analytics counted every one DELIVERED and every
 * consumer of the event stream is idle. What the bench's own polls cost is measured and taken off.
 */
async function singleSendOps({ session, ops, params, nats }) {
  const { gw, signal } = session;
  const team = await session.newTeam('bench-ops');
  const domain = await session.verifiedDomain(team.token, 'ops');
  if (!domain.available) return { available: false, reason: domain.reason };
  const statsPoll = () => apiSafe(gw, 'GET', '/v1/stats', { token: team.token });
  ops.statsPollCost = await pollCost(ops.stats, ops.idle, statsPoll, POLL_COST_SAMPLES, signal);
  const email = {
    from: `Bench <bench@${domain.name}>`,
    to: ['reader@inbox.mailfleet-bench.test'],
    subject: 'mailfleet storage operations',
    html: `<p>${'Hello from the mailfleet bench. '.repeat(16)}</p>`,
    text: 'Hello from the mailfleet bench.',
  };
  say(`single send: ${params.opsEmails} POST /v1/emails, ${params.connections} at a time, until DELIVERED and counted`);
  const before = await ops.stats.snapshot(Date.now(), signal);
  const t0 = Date.now();
  const answers = await mapLimit(Array.from({ length: params.opsEmails }), params.connections, () =>
    signal.aborted ? { status: 0 } : apiSafe(gw, 'POST', '/v1/emails', { token: team.token, body: email }));
  const ids = answers.filter((a) => a.status === 200).map((a) => a.body.emailId);
  if (ids.length === 0) return { available: false, reason: `POST /v1/emails answered ${answers[0]?.status} ${JSON.stringify(answers[0]?.body)}` };
  const postSeconds = round((Date.now() - t0) / 1000, 1);
  const counted = await analyticsCounted({ gw, token: team.token, want: ids.length, stallMs: params.drainS * 1000, signal });
  const idle = await consumersIdle(nats, undefined, params.drainS * 1000, signal, 'the single sends');
  const after = await ops.stats.snapshot(Date.now(), signal);
  // Read after the snapshot, so these reads are not counted: is every email DELIVERED?
  const want = new Set(ids);
  let deliveredStatus = 0;
  for (let page = 1; page <= Math.ceil(ids.length / 20) + 1 && !signal.aborted; page++) {
    const list = await apiSafe(gw, 'GET', `/v1/emails?limit=20&page=${page}`, { token: team.token });
    const data = list.status === 200 ? list.body.data ?? [] : [];
    deliveredStatus += data.filter((e) => want.has(e.id) && e.latestStatus === 'DELIVERED').length;
    if (data.length < 20) break;
  }
  const result = {
    available: true,
    accepted: ids.length,
    refused: answers.length - ids.length,
    postSeconds,
    analyticsDelivered: counted.delivered,
    analyticsCountedS: round((Date.now() - t0) / 1000, 1),
    deliveredStatusAfter: deliveredStatus,
    complete: counted.delivered >= ids.length && deliveredStatus >= ids.length,
    consumersIdle: idle,
    benchPolls: { 'GET /v1/stats': { count: counted.polls, opsPerPoll: ops.statsPollCost.perPoll } },
    ...phaseOps({ a: before, b: after, emails: ids.length, idle: ops.idle, polls: [{ count: counted.polls, cost: ops.statsPollCost }] }),
  };
  say(`single send: ${result.perEmail} storage operations per email`);
  return result;
}

/** POST /v1/emails/batch with BATCH_ITEMS emails per request, `--batch-connections` at a time, for `--duration`. */
async function batchSend({ gw, token, domainName, params, resources }) {
  const notAvailable = (reason) => {
    say(`batch send not available: ${reason}`);
    return { available: false, reason };
  };
  if (!domainName) return notAvailable('no verified domain (the send path was not available)');
  const items = Array.from({ length: BATCH_ITEMS }, (_, i) => ({
    from: `Bench <bench@${domainName}>`,
    to: [`reader+${i}@inbox.mailfleet-bench.test`],
    subject: `mailfleet batch bench ${i}`,
    html: `<p>${'Hello from the mailfleet bench. '.repeat(16)}</p>`,
    text: 'Hello from the mailfleet bench.',
  }));
  const probe = await api(gw, 'POST', '/v1/emails/batch', { token, body: items });
  if (probe.status !== 200) return notAvailable(`POST /v1/emails/batch answers ${probe.status}: ${JSON.stringify(probe.body)}`);
  const perRequest = probe.body?.data?.length ?? 0;
  if (perRequest !== BATCH_ITEMS) return notAvailable(`POST /v1/emails/batch accepted ${perRequest} of ${BATCH_ITEMS}`);
  say(`POST /v1/emails/batch (${BATCH_ITEMS} per request): ${params.batchConnections} connections for ${params.durationS} s`);
  const cpuBefore = platformCpuSeconds();
  const r = fromCannon(await cannon(resources, {
    url: `${gw}/v1/emails/batch`, method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(items), connections: params.batchConnections, duration: params.durationS,
  }));
  // What the load cost each process while it ran (accepting, and sending what was accepted meanwhile).
  const cpu = cpuBetween(cpuBefore, platformCpuSeconds(), r.ok2xx * BATCH_ITEMS);
  cpu.coresBusy = round(cpu.totalSeconds / params.durationS, 2);
  return { available: true, itemsPerRequest: BATCH_ITEMS, ...r, acceptedEmailsPerSecond: round((r.ok2xx * BATCH_ITEMS) / r.durationS, 1), cpu };
}

/**
 * `--send-warmup` seconds of the POST /v1/emails load before the measured one, so that the measure meets compiled
 * code (as the event pipeline's warm-up does), then a wait until its emails are in the sink (or nothing arrived for
 * 5 s, or `--drain` seconds passed), so that their sending does not run into the measure. Its figures are kept and
 * printed beside the measure, with no target: they are the send path's first use after a boot.
 */
async function warmUpSend({ seconds, load, mailDir, signal, drainMs }) {
  if (!(seconds > 0)) return null;
  say(`warm-up: POST /v1/emails for ${seconds} s, not measured against the targets`);
  const sinkBefore = await sinkCount(mailDir);
  const cpuBefore = platformCpuSeconds();
  const r = fromCannon(await load(seconds));
  const accepted = r.ok2xx;
  const cpu = cpuBetween(cpuBefore, platformCpuSeconds(), accepted);
  cpu.coresBusy = round(cpu.totalSeconds / seconds, 2);
  const t0 = performance.now();
  await drainSink({ mailDir, before: sinkBefore, want: accepted, stallMs: 5000, limitMs: drainMs, pollMs: 500, signal });
  return { ...r, cpu, drainS: round((performance.now() - t0) / 1000, 1) };
}

/**
 * Waits until `want` messages have arrived in the sink since it held `before`, or nothing arrived for `stallMs`, or
 * `limitMs` passed since `since`: `{delivered, drainedMs}`, drainedMs counted from `since` and null when not all came.
 */
async function drainSink({ mailDir, before, want, stallMs, limitMs = Infinity, pollMs, since = performance.now(), signal }) {
  let delivered = -1;
  let lastChange = performance.now();
  while (!signal.aborted) {
    const now = (await sinkCount(mailDir)) - before;
    if (now >= want) return { delivered: now, drainedMs: performance.now() - since };
    if (now !== delivered) lastChange = performance.now();
    delivered = now;
    if (performance.now() - lastChange >= stallMs || performance.now() - since >= limitMs) break;
    await sleep(pollMs);
  }
  return { delivered: Math.max(0, delivered), drainedMs: null };
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

async function sendPath({ gw, token, session, platform, params, resources, signal }) {
  const notAvailable = (reason) => {
    say(`send path not available: ${reason}`);
    return { available: false, reason };
  };
  // A verified domain, its records published on the bench's DNS server.
  const domain = await session.verifiedDomain(token, 'bench');
  if (!domain.available) return notAvailable(domain.reason);
  const name = domain.name;

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
  const load = (duration) => cannon(resources, { url: `${gw}/v1/emails`, method: 'POST', headers, body, connections: params.connections, duration });
  const warmup = await warmUpSend({ seconds: params.sendWarmupS, load, mailDir, signal, drainMs: params.drainS * 1000 });
  const sinkBefore = await sinkCount(mailDir);
  say(`POST /v1/emails: ${params.connections} connections for ${params.durationS} s`);
  const cpuBefore = platformCpuSeconds();
  const r = fromCannon(await load(params.durationS));
  const loadEnd = performance.now();
  // What the load cost each process while it ran (accepting, and sending what was accepted meanwhile).
  const cpu = cpuBetween(cpuBefore, platformCpuSeconds(), r.ok2xx);
  cpu.coresBusy = round(cpu.totalSeconds / params.durationS, 2);
  const sinkAtLoadEnd = (await sinkCount(mailDir)) - sinkBefore;
  // Drain: until every accepted email is in the sink, or nothing arrived for 5 s, or the limit.
  const { delivered, drainedMs } = await drainSink({
    mailDir, before: sinkBefore, want: r.ok2xx, stallMs: 5000, limitMs: DRAIN_LIMIT_MS, pollMs: 250, since: loadEnd, signal,
  });
  // Until every accepted email is in the sink or nothing arrived for stallMs: {delivered, waitedS}.
  const waitForBacklog = async (stallMs) => {
    const t0 = performance.now();
    const { delivered: last } = await drainSink({ mailDir, before: sinkBefore, want: r.ok2xx, stallMs, pollMs: 1000, signal });
    if (last < r.ok2xx) say(`${r.ok2xx - last} send-path emails not in the sink before the campaign`);
    return { delivered: last, waitedS: round((performance.now() - t0) / 1000, 1) };
  };
  return {
    available: true,
    domainName: name,
    waitForBacklog,
    ...r,
    cpu,
    warmup,
    sink: {
      deliveredDuringLoad: sinkAtLoadEnd,
      deliveredAfterDrain: delivered,
      drainAfterLoadS: drainedMs === null ? null : round(drainedMs / 1000, 1),
      note: drainedMs === null ? 'not every accepted email reached the sink within the drain limit' : 'every accepted email reached the sink',
    },
  };
}

/**
 * Messages per minute the platform's SMTP sink accepts from 10 pipelined connections with Nagle off
 * (smtp-client.mjs says why not nodemailer: it would measure its own 40 ms delayed-ACK stalls).
 */
async function sinkAcceptRate(smtpUrl, params, signal) {
  const url = new URL(smtpUrl);
  const connections = 10;
  const html = `<p>${'Hello from the mailfleet bench. '.repeat(16)}</p>`;
  const start = performance.now();
  const { accepted, failed } = await pipelinedSend({ host: url.hostname, port: Number(url.port), connections, messages: params.smtpMessages, html, signal });
  const seconds = (performance.now() - start) / 1000;
  return {
    messages: params.smtpMessages, connections, client: 'pipelined, Nagle off', accepted, failed, durationS: round(seconds, 2),
    perMinute: round((accepted / seconds) * 60, 0),
  };
}

/**
 * Waits until these durable consumers of the event stream (every one when `durables` is undefined) have nothing
 * pending or unacknowledged (or until `limitMs`); reports how long that took and what was left.
 */
async function consumersIdle(nc, durablesOrAll, limitMs, signal, what = 'the campaign') {
  const jsm = await jetstreamManager(nc);
  let durables = durablesOrAll;
  if (!durables) {
    durables = [];
    for await (const c of jsm.consumers.list('MAILFLEET_EVENTS')) if (c.config.durable_name) durables.push(c.config.durable_name);
  }
  const t0 = Date.now();
  const backlog = async () => {
    const infos = await Promise.all(durables.map((d) => jsm.consumers.info('MAILFLEET_EVENTS', d).catch(() => undefined)));
    return Object.fromEntries(durables.map((d, i) => [d, infos[i] ? infos[i].num_pending + infos[i].num_ack_pending : null]));
  };
  const atStart = await backlog();
  say(`waiting for the events of ${what} to be consumed: ${JSON.stringify(atStart)}`);
  let left = atStart;
  while (!signal.aborted && Object.values(left).some((n) => n !== null && n > 0) && Date.now() - t0 < limitMs) {
    await sleep(1000);
    left = await backlog();
  }
  return { atStart, left, waitedSeconds: round((Date.now() - t0) / 1000, 1), limitSeconds: limitMs / 1000 };
}

/**
 * The event pipeline's measure, after `--event-warmup` seconds of the same load for another team, webhook and receiver
 * (default 10 s): the measured events then meet compiled code, as on a platform in use. The first seconds of a path's
 * first use go largely to V8 compiling it: in a system-wide perf profile of an events run, TurboFan's compiler took
 * about a fifth of both cores through the first five seconds and about a twentieth from the tenth on. The measured
 * webhook is new, so its connections are opened under the load as before. The warm-up's own lags (the cold start) are
 * kept in `warmup` and printed beside the measure.
 */
async function eventPhase({ gw, team, params, resources, session, signal }) {
  let warmup;
  if (params.eventWarmupS > 0) {
    const warmTeam = await session.newTeam('bench-events-warmup');
    say(`warm-up: ${params.eventWarmupS} s of events for another team and webhook, not measured against the targets`);
    const w = await eventPipeline({ gw, team: warmTeam, params: { ...params, eventDurationS: params.eventWarmupS }, resources, session, signal });
    warmup = { seconds: params.eventWarmupS, events: w.events, publishErrors: w.publishErrors, analyticsCounter: w.analyticsCounter, webhook: w.webhook, cpu: w.cpu };
  }
  return { ...(await eventPipeline({ gw, team, params, resources, session, signal })), warmup: warmup ?? null };
}

async function eventPipeline({ gw, team, params, resources, session, signal }) {
  const { token, teamId } = team;
  const domain = await api(gw, 'POST', '/v1/domains', { token, body: { name: `events-${randomBytes(4).toString('hex')}.mailfleet-bench.test`, region: 'us-east-1' } });
  const domainId = domain.status === 200 ? domain.body.id : undefined;

  // Webhook arrivals, by event id, noted by the receiver's own thread.
  const webhookAt = new Map();
  const receiver = await session.startArrivalReceiver((arrivals) => {
    for (const [id, at] of arrivals) if (!webhookAt.has(id)) webhookAt.set(id, at);
  });
  const hook = await api(gw, 'POST', '/v1/webhooks', { token, body: { url: `${receiver.url}/bench`, eventTypes: ['email.delivered'] } });
  const webhookReason = hook.status === 200 ? undefined : `POST /v1/webhooks answered ${hook.status} ${JSON.stringify(hook.body)}`;

  const baseline = await api(gw, 'GET', '/v1/stats', { token });
  const statsReason = baseline.status === 200 ? undefined : `GET /v1/stats answered ${baseline.status}`;
  const baseCount = baseline.body?.totalDelivered ?? 0;

  // The kit's publisher: acks read by one subscription, not a request per event (js.publish's timer, subscription entry
  // and Error objects built for their stacks kept the bench's thread busy at 500 a second).
  const publisher = createAckedPublisher(resources.nats);
  const total = params.eventRate * params.eventDurationS;
  const published = []; // in publish order: {eventId, emailId, at}
  const byEmail = new Map();
  const counterAt = new Array(total).fill(undefined);
  const feedAt = new Map();
  let publishing = true;
  let publishErrors = 0;
  let pollErrors = 0;
  let polls = 0;

  /** When a feed poll last saw an event arrive. */
  let feedFreshAt = Date.now();
  // The feed has no target and its polls cannot see every arrival (events applied out of order land below a page
  // that brings nothing new): it is settled when complete or when its polls have seen nothing new for a while.
  const feedSettled = () => feedAt.size === total || Date.now() - feedFreshAt > FEED_SETTLE_MS;
  /** Every event reached the counter and the webhook receiver: the paths under load are through. */
  const arrived = () => published.length === total && counterAt.every((t) => t !== undefined)
    && (webhookReason !== undefined || webhookAt.size === total);
  const done = () => arrived() && feedSettled();
  /** The CPU readings when `arrived` first held after the load (the feed's polls may go on for FEED_SETTLE_MS). */
  let cpuAtArrival;
  const noteArrival = () => {
    if (!publishing && cpuAtArrival === undefined && arrived()) cpuAtArrival = platformCpuSeconds();
  };
  let giveUpAt = Infinity;
  const since = new Date(Date.now() - 1000).toISOString();
  /**
   * The feed's newest DELIVERED events since the run began, a page of 100 at a time until a page brings nothing
   * new: more than 100 can arrive between two polls when the platform is busy (polls then take seconds). Events
   * applied out of order can land below a page that brings nothing new; the full read at the end (`full`) finds them.
   */
  const inFeed = new Set();
  const readFeed = async (full = false) => {
    // A poll stops at the first page that brings nothing new (20 at most); the full read at the end reads every page.
    for (let page = 1; page <= (full ? Math.ceil(total / 100) + 1 : 20); page++) {
      const feed = await api(gw, 'GET', `/v1/events?status=DELIVERED&limit=100&page=${page}&startDate=${encodeURIComponent(since)}`, { token })
        .catch(() => undefined);
      if (feed?.status !== 200) return false;
      const at = Date.now();
      const events = feed.body.events ?? [];
      let fresh = 0;
      for (const e of events) {
        if (!byEmail.has(e.emailId)) continue;
        // The full read at the end only counts: an arrival time it gave would be its own, not the event's.
        if (full) inFeed.add(e.emailId);
        else if (!feedAt.has(e.emailId)) {
          feedAt.set(e.emailId, at);
          feedFreshAt = at;
          fresh += 1;
        }
      }
      if (events.length < 100 || (fresh === 0 && !full)) return true;
    }
    return true;
  };
  // The counter is one cheap read and is polled often; a feed page is a query over the feed (a scan on FerretDB,
  // which serves only _id from an index), so polling it at the counter's rate would load the store under test.
  const polling = () => !signal.aborted && (publishing || (!done() && Date.now() < giveUpAt));
  let feedPolls = 0;
  const poller = Promise.all([
    (async () => {
      while (polling()) {
        const tick = Date.now();
        const stats = statsReason ? undefined : await api(gw, 'GET', '/v1/stats', { token }).catch(() => undefined);
        const at = Date.now();
        polls += 1;
        if (stats?.status === 200) {
          const reflected = Math.min(total, stats.body.totalDelivered - baseCount);
          for (let k = 0; k < reflected; k++) if (counterAt[k] === undefined) counterAt[k] = at;
        } else if (!statsReason) pollErrors += 1;
        noteArrival();
        await sleep(Math.max(0, params.pollMs - (Date.now() - tick)));
      }
    })(),
    (async () => {
      while (polling()) {
        const tick = Date.now();
        feedPolls += 1;
        if (!(await readFeed())) pollErrors += 1;
        await sleep(Math.max(0, params.feedPollMs - (Date.now() - tick)));
      }
    })(),
  ]);

  say(`publishing ${total} email.delivered events at ${params.eventRate}/s`);
  const acks = [];
  // CPU of every process from the first publish until the last arrival at the counter and the webhook receiver (or
  // the drain limit): the polls of the counter and the feed are in it too, as they are in the lags, but not the feed's
  // polls after that, which wait FEED_SETTLE_MS for arrivals they missed.
  const cpuBefore = platformCpuSeconds();
  const t0 = Date.now();
  // Ids unique to this run: a random prefix and the event's number (no call to the random source per event).
  const runTag = randomBytes(6).toString('hex');
  const encoder = new TextEncoder();
  for (let i = 0; i < total && !signal.aborted; i++) {
    const wait = t0 + (i * 1000) / params.eventRate - Date.now();
    if (wait > 0) await sleep(wait);
    const n = i.toString(16).padStart(8, '0');
    const emailId = `em_bench${runTag}${n}`;
    const now = new Date();
    const event = {
      id: `evt_bench${runTag}${n}`, type: 'email.delivered', createdAt: now.toISOString(), teamId,
      data: {
        id: emailId, status: 'DELIVERED', to: ['reader@inbox.mailfleet-bench.test'], from: 'Bench <bench@mailfleet-bench.test>',
        subject: `bench event ${i}`, occurredAt: now.toISOString(), ...(domainId ? { domainId } : {}),
      },
    };
    const at = Date.now();
    published.push({ eventId: event.id, emailId, at });
    byEmail.set(emailId, event.id);
    acks.push(publisher.publish('mailfleet.email.delivered', encoder.encode(JSON.stringify(event)), { msgID: event.id, timeoutMs: params.drainS * 1000 })
      .catch(() => {
        publishErrors += 1;
      }));
  }
  const publishSeconds = (Date.now() - t0) / 1000;
  await Promise.all(acks);
  publishing = false;
  giveUpAt = Date.now() + params.drainS * 1000;
  await poller;
  const cpu = cpuBetween(cpuBefore, cpuAtArrival ?? platformCpuSeconds(), total);
  const pollSeconds = (Date.now() - t0) / 1000;
  // Which events the polls never saw arrive are in the feed all the same (a late arrival time unknown), and which are not.
  const seenByPolls = feedAt.size;
  const finalRead = await readFeed(true);

  const lags = (times) => {
    const arrivals = published.map((p, k) => ({ p, at: times(p, k) })).filter((x) => x.at !== undefined);
    const values = arrivals.map((x) => x.at - x.p.at);
    // By the second of the load an event was published in: a lag that grows second by second is a backlog (the path
    // is slower than the load), one that stays flat is the path's own latency.
    const bySecond = [];
    arrivals.forEach((x, i) => (bySecond[Math.floor((x.p.at - t0) / 1000)] ??= []).push(values[i]));
    return {
      values, last: Math.max(...arrivals.map((x) => x.at)),
      bySecond: [...bySecond].map((v) => {
        if (!v) return null;
        const { p50, max } = summarize(v);
        return { p50, max };
      }),
    };
  };
  // Arrivals per second from the first publish to the last arrival: what the path sustains when it falls behind.
  const section = (reason, { values, last, bySecond }, how) => {
    if (reason) return { available: false, reason };
    return {
      available: true, method: how, arrived: values.length, missing: total - values.length, lagMs: summarize(values),
      arrivalsPerSecond: values.length > 0 ? round(values.length / ((last - t0) / 1000), 1) : null, lagBySecondOfLoadMs: bySecond,
    };
  };
  return {
    events: total, ratePerSecond: params.eventRate, publishSeconds: round(publishSeconds, 2), publishErrors, pollIntervalMs: params.pollMs,
    feedPollIntervalMs: params.feedPollMs, feedPolls, polls, pollErrors, meanPollPeriodMs: polls > 0 ? round((pollSeconds * 1000) / polls, 1) : null, drainLimitS: params.drainS,
    analyticsCounter: section(statsReason, lags((_p, k) => counterAt[k]),
      'GET /v1/stats totalDelivered polled; the k-th published event counts as reflected when the total first reaches k (response arrival time)'),
    analyticsFeed: {
      ...section(undefined, lags((p) => feedAt.get(p.emailId)),
        'GET /v1/events?status=DELIVERED&startDate=<run start> polled, paged until a page brings nothing new; arrival = first response listing the email id'),
      seenByPolls, inFeedAtEnd: finalRead ? inFeed.size : null,
    },
    webhook: section(webhookReason, lags((p) => webhookAt.get(p.eventId)), 'HTTPS receiver; arrival = first request carrying the event id'),
    cpu,
  };
}

/** RSS of the platform's processes in MiB (the bench's own process left out). */
const platformTotalMiB = (m) => round(Object.entries(m ?? {}).filter(([n]) => !n.startsWith('bench')).reduce((sum, [, v]) => sum + (v ?? 0), 0), 1);

/** Each of issue 18's targets against this run: {id, what, value, target, pass} (pass null: not measured). */
function targetChecks(r) {
  const checks = [];
  const add = (id, what, value, target, ok) => checks.push({ id, what, value, target, pass: value === null || value === undefined ? null : ok(value) });
  const so = r.storageOps ?? {};
  add('singleSendOps', 'storage operations per single send', so.singleSend?.available ? so.singleSend.perEmail : null, `≤ ${TARGETS.singleSendOpsPerEmail}`, (v) => v <= TARGETS.singleSendOpsPerEmail);
  add('campaignOps', 'storage operations per campaign email', so.campaign?.available ? so.campaign.perEmail : null, `≤ ${TARGETS.campaignOpsPerEmail}`, (v) => v <= TARGETS.campaignOpsPerEmail);
  const sp = r.sendPath;
  add('sendOverRaw', 'POST /v1/emails / raw insertOne', sp.ratios?.sendOverRawInsert ?? null, `≥ ${TARGETS.sendOverRawInsert * 100} %`, (v) => v >= TARGETS.sendOverRawInsert);
  add('sendP99', 'POST /v1/emails p99 (ms)', sp.send.available ? sp.send.latencyMs.p99 : null, `≤ ${TARGETS.sendP99Ms} ms`, (v) => v <= TARGETS.sendP99Ms);
  add('batchOverRaw', 'POST /v1/emails/batch accepted emails/s / raw insertOne', sp.ratios?.batchAcceptedOverRawInsert ?? null, `≥ ${TARGETS.batchOverRawInsert}×`, (v) => v >= TARGETS.batchOverRawInsert);
  const c = r.campaignFanOut.campaign;
  const perMinute = c.available ? c.perMinute : null;
  add('campaignRate', 'campaign mails/min', perMinute, `≥ ${TARGETS.campaignPerMinute.toLocaleString('en-US')}`, (v) => v >= TARGETS.campaignPerMinute);
  const sinkRatio = perMinute ? round(r.campaignFanOut.sinkRawAccept.perMinute / perMinute, 2) : null;
  add('sinkOverCampaign', 'sink raw accept / campaign rate', sinkRatio, `≥ ${TARGETS.sinkOverCampaign}×`, (v) => v >= TARGETS.sinkOverCampaign);
  eventTargetChecks(r, add);
  add('rssIdle', 'platform RSS idle (MiB)', platformTotalMiB(r.memoryIdleMiB), '≤ 1.2 GiB', (v) => v <= TARGETS.rssIdleMiB);
  add('rssEnd', 'platform RSS at the end (MiB)', platformTotalMiB(r.memoryEndMiB), '≤ 1.6 GiB', (v) => v <= TARGETS.rssEndMiB);
  return checks;
}

/** The event pipeline's targets (issue 18), added through `add` as targetChecks does. */
function eventTargetChecks(r, add) {
  const ep = r.eventPipeline;
  // An event that never arrived fails the target whatever the p99 of those that did.
  const lagP99 = (sec) => (sec?.available && sec.missing === 0 ? sec.lagMs.p99 : sec?.available ? `${sec.missing} events missing` : null);
  add('counterLag', 'analytics counter lag p99 (ms)', lagP99(ep?.analyticsCounter), `≤ ${TARGETS.eventLagP99Ms / 1000} s, none missing`, (v) => typeof v === 'number' && v <= TARGETS.eventLagP99Ms);
  add('webhookLag', 'webhook receiver lag p99 (ms)', lagP99(ep?.webhook), `≤ ${TARGETS.eventLagP99Ms / 1000} s, none missing`, (v) => typeof v === 'number' && v <= TARGETS.eventLagP99Ms);
}

/** The event pipeline's rows of the table. */
function eventRows(r, mark) {
  const rows = [];
  const ep = r.eventPipeline;
  rows.push([`Event pipeline (${fmt(ep.events)} email.delivered at ${ep.ratePerSecond}/s, poll every ${ep.pollIntervalMs} ms, measured ${fmt(ep.meanPollPeriodMs)} ms)`]);
  const lagRow = (s, missing = 'missing') => (s.available ? `p50 ${fmt(s.lagMs.p50)} ms  p99 ${fmt(s.lagMs.p99)} ms  max ${fmt(s.lagMs.max)} ms  ${fmt(s.arrivalsPerSecond)}/s  (${fmt(s.arrived)} arrived, ${fmt(s.missing)} ${missing} after ${ep.drainLimitS} s)` : `not available: ${s.reason}`);
  rows.push(['analytics counter (/v1/stats)', `${lagRow(ep.analyticsCounter)}${mark('counterLag')}`]);
  const feed = ep.analyticsFeed;
  const feedEnd = feed.inFeedAtEnd === undefined ? '' : feed.inFeedAtEnd === null ? '; final read failed'
    : `; ${fmt(feed.inFeedAtEnd)} of ${fmt(ep.events)} in the feed at the end`;
  rows.push(['analytics feed (/v1/events)', `${lagRow(feed, 'not seen arriving').replace(/ after \d+ s\)$/, ` by the polls, which stop ${FEED_SETTLE_MS / 1000} s after the last new one)`)}${feedEnd}`]);
  rows.push(['webhook receiver', `${lagRow(ep.webhook)}${mark('webhookLag')}`]);
  const cpuRow = (cpu) => `${fmt(cpu.totalSeconds)} s, ${fmt(cpu.msPerItem)} ms per event: ${cpu.byProcess.filter((p) => p.seconds >= 0.05).map((p) => `${p.name} ${fmt(p.msPerItem)}`).join(', ')}`;
  if (ep.cpu) rows.push(['  CPU, first publish to last arrival', cpuRow(ep.cpu)]);
  const w = ep.warmup;
  if (w) {
    // The cold start, before the measure: no target.
    const brief = (s) => (s.available ? `p50 ${fmt(s.lagMs.p50)} ms  p99 ${fmt(s.lagMs.p99)} ms  (${fmt(s.arrived)} arrived, ${fmt(s.missing)} missing)` : `not available: ${s.reason}`);
    rows.push([`Warm-up before it (${fmt(w.events)} events for another team and webhook, the event path's first use; no target)`]);
    rows.push(['analytics counter (/v1/stats)', brief(w.analyticsCounter)]);
    rows.push(['webhook receiver', brief(w.webhook)]);
    if (w.cpu) rows.push(['  CPU, first publish to last arrival', cpuRow(w.cpu)]);
  }
  return rows;
}

/** The table of a `--only events` run. */
function renderEventsOnly(r) {
  const mark = (id) => {
    const t = r.targets.find((x) => x.id === id);
    return !t || t.pass === null ? '' : `  [${t.pass ? 'PASS' : 'FAIL'} ${t.target}]`;
  };
  const rows = [[`mailfleet bench --only events ${r.startedAt}  (${r.machine.cores} cores ${r.machine.cpuModel}, ${r.machine.memoryMiB} MiB, node ${r.machine.node})`]];
  rows.push(['load average (1/5/15 min)', `${r.machine.loadAverageAtStart.join(' ')} at start, ${r.machine.loadAverageAtEnd.join(' ')} at end`]);
  rows.push(...eventRows(r, mark));
  return table(rows);
}

function render(r) {
  const rows = [];
  const check = (id) => r.targets.find((t) => t.id === id);
  const mark = (id) => {
    const t = check(id);
    return !t || t.pass === null ? '' : `  [${t.pass ? 'PASS' : 'FAIL'} ${t.target}]`;
  };
  rows.push([`mailfleet bench ${r.startedAt}  (${r.machine.cores} cores ${r.machine.cpuModel}, ${r.machine.memoryMiB} MiB, node ${r.machine.node})`]);
  rows.push(['load average (1/5/15 min)', `${r.machine.loadAverageAtStart.join(' ')} at start, ${r.machine.loadAverageAtEnd.join(' ')} at end`]);
  rows.push(['platform boot', `${fmt(r.bootSeconds)} s`]);
  const so = r.storageOps;
  rows.push([`Storage operations per email (FerretDB per-command statistics; idle background ${fmt(so.idlePerSecond)} ops/s)`]);
  const incomplete = (p) => (p.campaignDeliveredCounter === undefined
    ? `${fmt(p.analyticsDelivered)} counted in analytics, ${fmt(p.deliveredStatusAfter)} DELIVERED of ${fmt(p.emails)}`
    : `${fmt(p.analyticsDelivered)} counted in analytics, ${fmt(p.campaignDeliveredCounter)} in the campaign's delivered counter, of ${fmt(p.emails)}`);
  const opsRows = (label, p, id) => {
    if (!p?.available) {
      rows.push([label, `not available: ${p?.reason ?? 'not run'}`]);
      return;
    }
    const polls = Object.entries(p.benchPolls).map(([what, x]) => `${fmt(x.count)} × ${what} ≈ ${fmt(x.opsPerPoll)} ops each`).join(', ');
    rows.push([`${label} (${fmt(p.emails)})`, `${fmt(p.perEmail)} per email${mark(id)}  (${fmt(p.ops)} ops in ${fmt(p.windowSeconds)} s, ${fmt(p.perEmailWithoutIdle)} without the idle background${p.complete ? '' : `; NOT complete: ${incomplete(p)}`})`]);
    rows.push(['  bench polls (subtracted)', `${fmt(p.benchPollOps)} ops: ${polls}`]);
    for (const t of p.top) rows.push([`  ${t.database} ${t.command} ${t.collection}`, `${fmt(t.count)}  (${fmt(t.perEmail)} per email)`]);
  };
  opsRows('single send', so.singleSend, 'singleSendOps');
  opsRows('campaign email', so.campaign, 'campaignOps');
  const sp = r.sendPath;
  rows.push([`Send path (${r.parameters.connections} connections, ${r.parameters.durationS} s each)`]);
  rows.push(['POST /v1/emails', sp.send.available ? cannonRow(sp.send) : `not available: ${sp.send.reason}`]);
  if (sp.send.available && sp.send.cpu) {
    const c = sp.send.cpu;
    rows.push(['  CPU during the load', `${fmt(c.totalSeconds)} s (${fmt(c.coresBusy)} of ${os.cpus().length} cores busy), ${fmt(c.msPerItem)} ms per accepted email: ${c.byProcess.filter((p) => p.seconds >= 0.05).map((p) => `${p.name} ${fmt(p.msPerItem)}`).join(', ')}`]);
  }
  if (sp.send.available) {
    rows.push(['  reached the sink', `${fmt(sp.send.sink.deliveredDuringLoad)} during load, ${fmt(sp.send.sink.deliveredAfterDrain)} after drain${sp.send.sink.drainAfterLoadS === null ? ' (not all)' : ` (${sp.send.sink.drainAfterLoadS} s after load)`}${sp.send.sink.beforeCampaign ? `, ${fmt(sp.send.sink.beforeCampaign.delivered)} before the campaign (${fmt(sp.send.sink.beforeCampaign.waitedS)} s more)` : ''}`]);
  }
  if (sp.send.available) rows.push(['  p99', `${fmt(sp.send.latencyMs.p99)} ms${mark('sendP99')}`]);
  if (sp.send.warmup) rows.push([`  warm-up before it (${fmt(sp.send.warmup.durationS)} s, the path's first use; no target)`, `${cannonRow(sp.send.warmup)}; ${fmt(sp.send.warmup.cpu.msPerItem)} ms of CPU per accepted email`]);
  const b = sp.batch;
  rows.push([`POST /v1/emails/batch (${b?.itemsPerRequest ?? BATCH_ITEMS} per request, ${r.parameters.batchConnections} connections)`, b?.available
    ? `${fmt(b.acceptedEmailsPerSecond)} emails/s accepted  (${fmt(b.ok2xxPerSecond)} req/s, p50 ${fmt(b.latencyMs.p50)} ms, p99 ${fmt(b.latencyMs.p99)} ms, ${fmt(b.non2xx)} non-2xx, ${fmt(b.errors)} errors)`
    : `not available: ${b?.reason ?? 'not run'}`]);
  rows.push(['raw insertOne (FerretDB)', `${fmt(sp.rawInsertOne.perSecond)} /s  p50 ${fmt(sp.rawInsertOne.latencyMs.p50)} ms  p99 ${fmt(sp.rawInsertOne.latencyMs.p99)} ms  (${fmt(sp.rawInsertOne.errors)} errors)`]);
  rows.push(['GET /v1/health', cannonRow(sp.health)]);
  const ratio = (x) => (x === null ? '—' : `${x.toPrecision(3)} (${(x * 100).toPrecision(3)} %)`);
  rows.push(['send / raw insert', sp.ratios?.sendOverRawInsert ? `${ratio(sp.ratios.sendOverRawInsert)}${mark('sendOverRaw')}` : 'not available']);
  rows.push(['batch emails / raw insert', sp.ratios?.batchAcceptedOverRawInsert ? `${fmt(sp.ratios.batchAcceptedOverRawInsert)}×${mark('batchOverRaw')}` : 'not available']);
  rows.push(['send / health', sp.ratios?.sendOverHealth ? ratio(sp.ratios.sendOverHealth) : 'not available']);
  const cf = r.campaignFanOut;
  rows.push(['Campaign fan-out']);
  const c = cf.campaign;
  rows.push([`campaign to ${fmt(r.parameters.campaignContacts)} contacts`, c.available
    ? `${fmt(c.perMinute)} mails/min${mark('campaignRate')}  (${fmt(c.inSink)} of ${fmt(c.contacts)} in the sink, last after ${fmt(c.lastMessageS)} s; ${c.outcome}${c.duplicates ? `, ${fmt(c.duplicates)} duplicates` : ''})`
    : `not available: ${c.reason}`]);
  if (c.available) {
    rows.push(['  batch size / window', `${fmt(c.batchSize)} / ${fmt(c.batchWindowMinutes)} min`]);
    rows.push(['  COMPLETED after', c.completedS === null ? `not COMPLETED (status ${c.status})` : `${fmt(c.completedS)} s  (first message after ${fmt(c.firstMessageS)} s)`]);
    const later = c.deliveredCounterAfterEventsConsumed === undefined ? '' : `; ${fmt(c.deliveredCounterAfterEventsConsumed)} once the event consumers were idle`;
    rows.push(['  delivered counter', c.counters ? `${fmt(c.counters.delivered)} of ${fmt(c.contacts)}${c.deliveredCounterAfterLastMessageS === null ? ` after waiting ${fmt(r.parameters.drainS)} s${later}` : ` (${c.deliveredCounterAfterLastMessageS} s after the last message)`}` : '—']);
    if (c.cpu) rows.push(['  CPU, sendNow to last message', `${fmt(c.cpu.totalSeconds)} s, ${fmt(c.cpu.msPerItem)} ms per mail: ${c.cpu.byProcess.filter((p) => p.seconds >= 0.05).map((p) => `${p.name} ${fmt(p.msPerItem)}`).join(', ')}`]);
    rows.push(['  contacts stored (bulk)', `${fmt(c.contacts)} in ${fmt(c.bookSeconds)} s${c.sendPathBacklogAtStart > 0 ? `; ${fmt(c.sendPathBacklogAtStart)} send-path emails still queued at start` : ''}`]);
  }
  const sinkRatio = check('sinkOverCampaign')?.value;
  rows.push(['SMTP sink raw accept', `${fmt(cf.sinkRawAccept.perMinute)} mails/min${sinkRatio ? `, ${fmt(sinkRatio)}× the campaign${mark('sinkOverCampaign')}` : ''}  (${fmt(cf.sinkRawAccept.accepted)} of ${fmt(cf.sinkRawAccept.messages)} in ${fmt(cf.sinkRawAccept.durationS)} s, ${cf.sinkRawAccept.connections} pipelined connections, ${fmt(cf.sinkRawAccept.failed)} failed)`]);
  const bl = r.campaignEventBacklog;
  const pendingText = (m) => Object.entries(m).map(([d, n]) => `${d} ${n === null ? '?' : fmt(n)}`).join(', ');
  rows.push(['campaign events consumed', Object.values(bl.left).every((n) => n === null || n === 0)
    ? `${fmt(bl.waitedSeconds)} s after the campaign (pending then: ${pendingText(bl.atStart)})`
    : `not all within ${fmt(bl.limitSeconds)} s (pending then: ${pendingText(bl.atStart)}; left: ${pendingText(bl.left)})`]);
  rows.push(...eventRows(r, mark));
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
  rows.push(['platform (without the bench)', `${fmt(check('rssIdle')?.value)}${mark('rssIdle')} -> ${fmt(check('rssEnd')?.value)}${mark('rssEnd')}`]);
  rows.push(['Targets (issue 18)']);
  for (const t of r.targets) {
    rows.push([t.what, `${t.pass === null ? 'not measured' : t.pass ? 'PASS' : 'FAIL'}  ${fmt(t.value)}  (target ${t.target})`]);
  }
  return table(rows);
}

/** The CPU line of an `--only` run: in all, the cores busy when known, and each process's share per item. */
function cpuLine(cpu, per) {
  if (!cpu) return '';
  const busy = cpu.coresBusy === undefined ? '' : ` (${fmt(cpu.coresBusy)} cores busy)`;
  return `CPU ${fmt(cpu.totalSeconds)} s${busy}, ${fmt(cpu.msPerItem)} ms per ${per}: ${cpu.byProcess.filter((x) => x.seconds >= 0.05).map((x) => `${x.name} ${fmt(x.msPerItem)}`).join(', ')}\n`;
}

/** One HTTP load's line: rate, latency and outcomes. */
function cannonRow(c) {
  return `${fmt(c.ok2xxPerSecond)} req/s  p50 ${fmt(c.latencyMs.p50)} ms  p99 ${fmt(c.latencyMs.p99)} ms  (${fmt(c.ok2xx)} ok, ${fmt(c.non2xx)} non-2xx, ${fmt(c.errors)} errors)`;
}
