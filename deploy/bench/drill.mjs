// The fault drill behind `npm run drill` (entry: deploy/bin/drill.mjs): a campaign through the public API while
// every service is killed with SIGKILL and restarted in turn and NATS is restarted once; then the losses are
// counted: mail in the sink per contact, the final status of every email, every email event at a webhook,
// and the campaign's own counters.
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CAMPAIGN_ENV, campaignAddresses, campaignFigures, createBook, followCampaign, startCampaign } from './campaign.mjs';
import { apiPatient, apiSafe, fmt, mapLimit, round, sinkWatcher, table } from './lib.mjs';
import { fileStamp, repoRoot, withPlatform } from './platform.mjs';

const say = (message) => process.stderr.write(`[drill] ${message}\n`);

/**
 * What can be hit, in the default order: every service and the gateway killed with SIGKILL, NATS restarted once. The
 * processes on the send path and the event path come first, so they are hit while the campaign's mail and events
 * are still under way (a 5,000-contact campaign takes tens of seconds here).
 */
export const FAULT_TARGETS = ['emails', 'campaigns', 'nats', 'suppressions', 'webhooks', 'analytics', 'contacts', 'domains', 'auth', 'gateway'];

/**
 * The sending, campaign and webhook timings of the e2e platform (services/testkit/src/e2e-environment.ts): a killed
 * holder's leases expire in seconds, so the drill ends in minutes. What is verified does not depend on them.
 */
export const DRILL_CLOCK = {
  SEND_RETRY_BASE_MS: '500',
  SEND_RETRY_MAX_MS: '2000',
  SEND_POLL_INTERVAL_MS: '200',
  SMTP_TIMEOUT_MS: '5000',
  SEND_LEASE_MS: '20000',
  IDEMPOTENCY_PROCESSING_TIMEOUT_MS: '15000',
  WEBHOOK_RETRY_BASE_MS: '200',
  WEBHOOK_RETRY_MAX_MS: '2000',
  WEBHOOK_TIMEOUT_MS: '3000',
  WEBHOOK_CLAIM_LEASE_MS: '5000',
  WEBHOOK_POLL_INTERVAL_MS: '200',
  CAMPAIGN_SENDER_POLL_MS: '500',
  CAMPAIGN_BATCH_LEASE_MS: '15000',
  CAMPAIGN_BATCH_RETRY_DELAY_MS: '1000',
};

/** Statuses after which nothing more happens to an email here (SENT is not: the mailbox simulator reports DELIVERED). */
const FINAL = new Set(['DELIVERED', 'BOUNCED', 'COMPLAINED', 'OPENED', 'CLICKED', 'FAILED', 'REJECTED', 'CANCELLED', 'SUPPRESSED', 'RENDERING_FAILURE']);
const EMAIL_EVENT_TYPES = [
  'email.queued', 'email.sent', 'email.delivery_delayed', 'email.delivered', 'email.bounced', 'email.rejected', 'email.rendering_failure',
  'email.complained', 'email.failed', 'email.cancelled', 'email.suppressed', 'email.opened', 'email.clicked',
];

/** Runs the drill; resolves to the exit code (0: no loss, 1: a loss or a failure). */
export async function runDrill(params) {
  const startedAt = new Date();
  const result = {
    startedAt: startedAt.toISOString(),
    machine: { cores: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? 'unknown', node: process.version, loadAverageAtStart: os.loadavg().map((l) => round(l)) },
    parameters: { ...params, clock: { ...CAMPAIGN_ENV, ...DRILL_CLOCK } },
  };
  return withPlatform({ tag: 'drill', keep: params.keep, env: { ...CAMPAIGN_ENV, ...DRILL_CLOCK }, say }, async (session) => {
    const { platform, gw, signal } = session;
    result.bootSeconds = session.bootSeconds;

    // --- setup: team, domain, webhook, book -------------------------------------------------------
    const team = await session.newTeam('drill');
    const { token } = team;
    const domain = await session.verifiedDomain(token, 'drill');
    if (!domain.available) throw new Error(`no verified domain: ${domain.reason}`);
    const receiver = await session.startReceiver();
    const hookArrivals = new Map(); // event id -> deliveries received
    const hookFirstAt = new Map(); // event id -> first arrival (ms)
    let hookRequests = 0;
    receiver.setResponse((request) => {
      hookRequests += 1;
      try {
        const id = JSON.parse(request.rawBody.toString('utf8')).id;
        hookArrivals.set(id, (hookArrivals.get(id) ?? 0) + 1);
        if (!hookFirstAt.has(id)) hookFirstAt.set(id, Date.now());
      } catch {
        // not an event
      }
      return { status: 200 };
    });
    const hook = await apiSafe(gw, 'POST', '/v1/webhooks', { token, body: { url: `${receiver.url}/drill`, eventTypes: EMAIL_EVENT_TYPES, description: 'drill' } });
    if (hook.status !== 200) throw new Error(`POST /v1/webhooks answered ${hook.status} ${JSON.stringify(hook.body)}`);
    const { addresses } = campaignAddresses(params.contacts, 'drill');
    say(`storing ${params.contacts} contacts`);
    const book = await createBook({ gw, token, addresses, say, signal });

    // --- the campaign, and the faults while it sends ----------------------------------------------
    const watcher = sinkWatcher(platform.mailDir);
    await watcher.skipExisting();
    const started = await startCampaign({ gw, token, from: `Drill <drill@${domain.name}>`, bookId: book.bookId, name: 'drill' });
    say(`campaign ${started.id} to ${book.stored} contacts started`);
    const at = (t) => round((t - started.startedAtMs) / 1000, 1);
    const follow = followCampaign({
      gw, token, campaignId: started.id, addresses, watcher, startedAtMs: started.startedAtMs,
      stallMs: params.drainS * 1000, timeoutMs: params.timeoutS * 1000, signal, say,
    });
    const faults = await (async () => {
      // The first fault lands --interval seconds after mail starts flowing (or after 2 minutes without any).
      const waitStart = Date.now();
      while (!signal.aborted && follow.state.distinct === 0 && Date.now() - waitStart < 120_000) await sleep(250);
      const out = [];
      for (const name of params.faults) {
        await sleep(params.intervalS * 1000, undefined, { signal }).catch(() => undefined);
        session.checkAbort();
        out.push(await fault(platform, name, params.downS, { at, inSink: () => follow.state.distinct }));
      }
      return out;
    })();
    const faultsEndMs = Date.now();
    say('every fault done; waiting for the campaign');
    const outcome = await follow.done;
    result.campaign = { id: started.id, ...campaignFigures(follow.state, { contacts: addresses.length, startedAtMs: started.startedAtMs, outcome }), bookSeconds: book.seconds };
    result.faults = faults;

    // --- every email final ----------------------------------------------------------------------------
    // Each wait below ends when everything is there, or when nothing moved for --drain seconds: slow is not lost.
    say('listing the emails and waiting for final statuses');
    const emails = await listAllEmails(gw, token, signal);
    const isFinal = (e) => FINAL.has(e.latestStatus);
    await waitForProgress({
      what: 'emails with a final status', total: emails.size, stallMs: params.drainS * 1000, signal,
      count: async () => {
        const open = [...emails.values()].filter((e) => !isFinal(e));
        await mapLimit(open, 8, async (e) => {
          const r = await apiSafe(gw, 'GET', `/v1/emails/${e.id}`, { token });
          if (r.status === 200) e.latestStatus = r.body.latestStatus;
        });
        return [...emails.values()].filter(isFinal).length;
      },
    });
    const perAddress = new Map();
    for (const e of emails.values()) for (const to of e.to) perAddress.set(to.toLowerCase(), (perAddress.get(to.toLowerCase()) ?? 0) + 1);
    const statusCounts = {};
    for (const e of emails.values()) statusCounts[e.latestStatus] = (statusCounts[e.latestStatus] ?? 0) + 1;
    result.emails = {
      listed: emails.size,
      contactsWithoutEmail: addresses.filter((a) => !perAddress.has(a)).length,
      contactsWithSeveralEmails: addresses.filter((a) => (perAddress.get(a) ?? 0) > 1).length,
      notFinal: [...emails.values()].filter((e) => !isFinal(e)).length,
      statuses: statusCounts,
    };

    // --- every email event at the webhook ---------------------------------------------------------
    say(`reading the events of ${emails.size} emails (GET /v1/emails/{id}/events)`);
    const events = new Map(); // event id -> {emailId, status}
    let eventReadErrors = 0;
    await mapLimit([...emails.values()], 8, async (e) => {
      for (let page = 1; page < 100; page++) {
        // A read that times out under the load after the campaign is asked again for up to a minute.
        const r = await apiPatient(gw, 'GET', `/v1/emails/${e.id}/events?limit=100&page=${page}`, { token }, { forMs: 60_000, signal });
        if (r.status !== 200) {
          eventReadErrors += 1;
          return;
        }
        for (const ev of r.body.events) events.set(ev.id, { emailId: e.id, status: ev.status });
        if (r.body.events.length < 100) return;
      }
    });
    const missingAtHook = () => [...events.keys()].filter((id) => !hookArrivals.has(id));
    const hookWait = await waitForProgress({
      what: 'email events at the webhook', total: events.size, stallMs: params.drainS * 1000, signal,
      count: async () => {
        await sleep(1000);
        return events.size - missingAtHook().length;
      },
    });
    const missing = missingAtHook();
    const missingByStatus = {};
    for (const id of missing) missingByStatus[events.get(id).status] = (missingByStatus[events.get(id).status] ?? 0) + 1;
    const byStatus = {};
    for (const ev of events.values()) byStatus[ev.status] = (byStatus[ev.status] ?? 0) + 1;
    const arrivals = [...hookFirstAt.values()];
    const hookSpanS = arrivals.length > 1 ? (Math.max(...arrivals) - started.startedAtMs) / 1000 : null;

    // --- the campaign's counters: every mail counted once as sent and once as delivered, whatever was killed --
    const expectedCounters = { total: addresses.length, sent: addresses.length, delivered: addresses.length };
    const readCounters = async () => {
      const r = await apiSafe(gw, 'GET', `/v1/campaigns/${started.id}`, { token });
      return r.status === 200 ? Object.fromEntries(Object.keys(expectedCounters).map((k) => [k, r.body[k]])) : undefined;
    };
    let counters = await readCounters();
    const countersUntil = Date.now() + params.drainS * 1000;
    while (!signal.aborted && Date.now() < countersUntil && !(counters && Object.entries(expectedCounters).every(([k, v]) => counters[k] === v))) {
      await sleep(1000);
      counters = (await readCounters()) ?? counters;
    }
    result.counters = { expected: expectedCounters, read: counters ?? null };

    // --- settle, then the sink once more: a message sent twice after a lease expired shows up late --
    const settleUntil = Math.max(faultsEndMs, follow.state.lastAtMs ?? 0) + params.settleS * 1000;
    if (Date.now() < settleUntil) {
      say(`settling ${Math.ceil((settleUntil - Date.now()) / 1000)} s before the last look at the sink`);
      await sleep(settleUntil - Date.now(), undefined, { signal }).catch(() => undefined);
    }
    await follow.scanOnce();
    const sink = campaignFigures(follow.state, { contacts: addresses.length, startedAtMs: started.startedAtMs, outcome });
    result.sink = { contacts: addresses.length, exactlyOnce: addresses.filter((a) => follow.state.received.get(a) === 1).length, missing: sink.missing, duplicates: sink.duplicates, unexpected: sink.unexpectedRecipients };
    result.webhook = {
      emailEvents: events.size, eventsByStatus: byStatus, eventReadErrors, received: events.size - missing.length, missing: missing.length, missingByStatus,
      missingIds: missing.slice(0, 20), requests: hookRequests, redelivered: [...hookArrivals.values()].reduce((s, n) => s + n - 1, 0),
      lastArrivalS: hookSpanS === null ? null : round(hookSpanS, 1),
      perSecond: hookSpanS ? round(arrivals.length / hookSpanS, 2) : null,
      drainOutcome: hookWait,
    };

    // --- verdict ------------------------------------------------------------------------------------
    // A fault after the last message tests a restart, not the work it interrupts: the emails service, when it is hit,
    // must be hit while the campaign's mail is still being sent.
    const emailsFault = faults.find((f) => f.name === 'emails');
    const whileFlowing = faults.filter((f) => f.inSinkBefore < addresses.length).map((f) => f.name);
    result.faultsWhileMailFlowed = whileFlowing;
    const checks = [
      ['every fault: killed and back', faults.every((f) => f.ok), faults.filter((f) => !f.ok).map((f) => `${f.name}: ${f.error}`).join('; ') || `${faults.length} faults`],
      ['the emails service hit while mail was being sent', !emailsFault || emailsFault.inSinkBefore < addresses.length,
        `${whileFlowing.length} of ${faults.length} faults before the last message${whileFlowing.length ? ` (${whileFlowing.join(', ')})` : ''}${emailsFault ? '' : '; the emails service was not among the faults'}`],
      ['campaign COMPLETED', follow.state.status === 'COMPLETED', `status ${follow.state.status}`],
      ['every contact: exactly one message in the sink', result.sink.exactlyOnce === addresses.length && result.sink.unexpected === 0,
        `${fmt(result.sink.exactlyOnce)} of ${fmt(addresses.length)}; ${fmt(result.sink.missing)} missing, ${fmt(result.sink.duplicates)} duplicates, ${fmt(result.sink.unexpected)} to unknown addresses`],
      ['every contact: one email', emails.size === addresses.length && result.emails.contactsWithoutEmail === 0 && result.emails.contactsWithSeveralEmails === 0,
        `${fmt(emails.size)} emails; ${fmt(result.emails.contactsWithoutEmail)} contacts without, ${fmt(result.emails.contactsWithSeveralEmails)} with several`],
      ['every email: final status', result.emails.notFinal === 0 && emails.size > 0, `${Object.entries(statusCounts).map(([k, v]) => `${k} ${fmt(v)}`).join(', ') || 'no emails'}`],
      ['campaign counters: each mail counted once', counters !== undefined && Object.entries(expectedCounters).every(([k, v]) => counters[k] === v),
        counters ? Object.keys(expectedCounters).map((k) => `${k} ${fmt(counters[k])} of ${fmt(expectedCounters[k])}`).join(', ') : 'GET /v1/campaigns/{id} failed'],
      ['every email event at the webhook', missing.length === 0 && eventReadErrors === 0 && events.size > 0,
        `${fmt(result.webhook.received)} of ${fmt(events.size)}${missing.length ? ` (missing: ${Object.entries(missingByStatus).map(([k, v]) => `${k} ${v}`).join(', ')})` : ''}${eventReadErrors ? `, ${eventReadErrors} event lists unreadable` : ''}; ${fmt(result.webhook.redelivered)} redelivered; last after ${fmt(result.webhook.lastArrivalS)} s (${fmt(result.webhook.perSecond)}/s)`],
    ];
    result.checks = checks.map(([name, ok, detail]) => ({ name, ok, detail }));
    result.passed = checks.every(([, ok]) => ok);
    result.finishedAt = new Date().toISOString();
    result.machine.loadAverageAtEnd = os.loadavg().map((l) => round(l));

    const file = path.join(repoRoot, 'bench-results', `drill-${fileStamp(startedAt)}.json`);
    await fsp.mkdir(path.dirname(file), { recursive: true });
    await fsp.writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`${render(result)}\n\nJSON: ${path.relative(process.cwd(), file)}\n`);
    if (!result.passed) say(`LOSS: see the table; platform logs in ${session.logDir}`);
    return result.passed ? 0 : 1;
  });
}

/** SIGKILL one child (NATS: a restart), wait for its exit, leave it down for downS, start it again and wait until it is ready. */
async function fault(platform, name, downS, { at, inSink }) {
  const t = Date.now();
  const record = { name, atS: at(t), inSinkBefore: inSink(), how: name === 'nats' ? 'restart (SIGTERM, start)' : 'SIGKILL, start', ok: false };
  try {
    if (name === 'nats') {
      await platform.stopChild('nats');
    } else {
      platform.kill(name, 'SIGKILL');
      await platform.waitForExit(name);
    }
    await sleep(downS * 1000);
    await platform.startChild(name);
    record.ok = true;
  } catch (error) {
    record.error = error.message.split('\n')[0];
  }
  record.backAfterS = round((Date.now() - t) / 1000, 1);
  say(`${name}: ${record.how} at +${record.atS} s, ${record.ok ? `back after ${record.backAfterS} s` : `FAILED: ${record.error}`}`);
  return record;
}

/**
 * Calls `count()` until it reaches `total` ('complete'), or its value has not grown for stallMs ('stalled'), or the
 * run is interrupted ('aborted'); says how far it got every 15 s.
 */
async function waitForProgress({ what, total, count, stallMs, signal }) {
  let best = -1;
  let lastChange = Date.now();
  let lastSay = Date.now();
  for (;;) {
    if (signal.aborted) return 'aborted';
    const n = await count();
    if (n >= total) return 'complete';
    if (n > best) {
      best = n;
      lastChange = Date.now();
    }
    if (Date.now() - lastChange > stallMs) {
      say(`  ${what}: ${n} of ${total}, nothing new for ${Math.round(stallMs / 1000)} s: giving up`);
      return 'stalled';
    }
    if (Date.now() - lastSay >= 15_000) {
      lastSay = Date.now();
      say(`  ${what}: ${n} of ${total}`);
    }
    await sleep(500);
  }
}

/**
 * Every email of the team ({id, to, latestStatus}) through GET /v1/emails (20 a page, newest first; nothing is
 * created meanwhile). Each page is a scan of the emails on FerretDB, and right after a campaign the platform is
 * still working off its events: a page that times out (5xx) is asked again for up to two minutes.
 */
async function listAllEmails(gw, token, signal) {
  const emails = new Map();
  let count = Infinity;
  for (let page = 1; emails.size < count && !signal.aborted; page++) {
    const r = await apiPatient(gw, 'GET', `/v1/emails?limit=20&page=${page}`, { token }, { forMs: 120_000, signal });
    if (r.status !== 200) throw new Error(`GET /v1/emails answered ${r.status} ${JSON.stringify(r.body)}`);
    count = r.body.count;
    if (r.body.data.length === 0) break;
    for (const e of r.body.data) emails.set(e.id, { id: e.id, to: Array.isArray(e.to) ? e.to : [e.to], latestStatus: e.latestStatus });
  }
  return emails;
}

function render(r) {
  const rows = [];
  rows.push([`mailfleet drill ${r.startedAt}  (${r.machine.cores} cores ${r.machine.cpuModel}, node ${r.machine.node})`]);
  rows.push(['load average (1/5/15 min)', `${r.machine.loadAverageAtStart.join(' ')} at start, ${r.machine.loadAverageAtEnd.join(' ')} at end`]);
  const c = r.campaign;
  rows.push(['campaign', `${fmt(c.contacts)} contacts; ${fmt(c.inSink)} in the sink, last after ${fmt(c.lastMessageS)} s (${fmt(c.perMinute)}/min); COMPLETED ${c.completedS === null ? 'never' : `after ${fmt(c.completedS)} s`}; ${c.outcome}`]);
  rows.push([`Faults (times from the campaign's start; ${r.parameters.intervalS} s after the last one is back, the first that long after mail flows, ${r.parameters.downS} s down)`]);
  for (const f of r.faults) {
    rows.push([f.name, `${f.how} at +${fmt(f.atS)} s (${fmt(f.inSinkBefore)} in the sink): ${f.ok ? `back after ${fmt(f.backAfterS)} s` : `FAILED ${f.error}`}`]);
  }
  rows.push(['Checks']);
  for (const ch of r.checks) rows.push([ch.name, `${ch.ok ? 'ok  ' : 'LOSS'}  ${ch.detail}`]);
  rows.push(['Result']);
  rows.push(['drill', r.passed ? 'PASS: no loss' : 'FAIL: see LOSS above']);
  return table(rows);
}
