// A campaign through the public API, followed into the SMTP sink: used by `npm run bench` (campaign fan-out)
// and `npm run drill` (the campaign the faults hit).
/* global AbortController */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { api, apiSafe, round } from './lib.mjs';

/** Emails per bulk contacts request (the gateway's maximum). */
const BULK_MAX = 1000;
/** The campaigns API's largest batch: with it (up to 100,000 contacts) the whole book is one batch. */
export const MAX_BATCH_SIZE = 100_000;

/** `count` distinct addresses on a domain of this run; local parts the mailbox simulator accepts and reports DELIVERED. */
export function campaignAddresses(count, label) {
  const domain = `${label}-${randomBytes(3).toString('hex')}.inbox.mailfleet-bench.test`;
  return { domain, addresses: Array.from({ length: count }, (_, i) => `reader${i}@${domain}`) };
}

/** A contact book holding `addresses`, through POST /v1/contactBooks/{id}/contacts/bulk in requests of 1,000. */
export async function createBook({ gw, token, addresses, say, signal }) {
  const t0 = performance.now();
  const book = await api(gw, 'POST', '/v1/contactBooks', { token, body: { name: `bench ${randomBytes(3).toString('hex')}` } });
  if (book.status !== 200) throw new Error(`POST /v1/contactBooks answered ${book.status} ${JSON.stringify(book.body)}`);
  const bookId = book.body.id;
  let stored = 0;
  for (let i = 0; i < addresses.length && !signal.aborted; i += BULK_MAX) {
    const chunk = addresses.slice(i, i + BULK_MAX).map((email, j) => ({ email, firstName: `Reader${i + j}`, properties: { n: String(i + j) } }));
    const res = await api(gw, 'POST', `/v1/contactBooks/${bookId}/contacts/bulk`, { token, body: chunk });
    if (res.status !== 200) throw new Error(`POST .../contacts/bulk answered ${res.status} ${JSON.stringify(res.body)}`);
    if (res.body.errors?.length) throw new Error(`POST .../contacts/bulk refused items: ${JSON.stringify(res.body.errors.slice(0, 3))}`);
    stored += res.body.count;
    if ((i / BULK_MAX) % 5 === 4) say(`  ${stored} contacts stored`);
  }
  return { bookId, stored, seconds: round((performance.now() - t0) / 1000, 1) };
}

/** What the campaigns service makes of one batchWindowMinutes "minute" on the platforms bench and drill boot (the e2e value). */
export const CAMPAIGN_ENV = { CAMPAIGN_BATCH_WINDOW_UNIT_MS: '1000' };

/** The smallest batchWindowMinutes POST /v1/campaigns accepts, from the gateway's OpenAPI document (0 when it names none). */
export async function smallestWindow(gw) {
  const doc = await api(gw, 'GET', '/v1/openapi.json');
  const body = doc.body?.paths?.['/v1/campaigns']?.post?.requestBody?.content?.['application/json']?.schema;
  const min = body?.properties?.batchWindowMinutes?.minimum;
  return Number.isInteger(min) && min > 0 ? min : 0;
}

/** Creates the campaign with sendNow, the largest batch and the smallest window the API allows. */
export async function startCampaign({ gw, token, from, bookId, name }) {
  const batchWindowMinutes = await smallestWindow(gw);
  const startedAtMs = Date.now();
  const res = await api(gw, 'POST', '/v1/campaigns', {
    token,
    body: {
      name,
      from,
      subject: 'mailfleet {{firstName}}',
      contactBookId: bookId,
      html: '<p>Hello {{firstName}} (#{{properties.n}}), this is the mailfleet bench.</p><p><a href="{{service_unsubscribe_url}}">Unsubscribe</a></p>',
      sendNow: true,
      batchSize: MAX_BATCH_SIZE,
      batchWindowMinutes,
    },
  });
  if (res.status !== 200) throw new Error(`POST /v1/campaigns answered ${res.status} ${JSON.stringify(res.body)}`);
  return { id: res.body.id, status: res.body.status, startedAtMs, batchSize: res.body.batchSize, batchWindowMinutes: res.body.batchWindowMinutes };
}

/**
 * Follows a running campaign: the sink (every message to one of `addresses`, with the sink's receive time)
 * and GET /v1/campaigns/{id} once a second (errors tolerated: a drill kills the gateway). Returns
 * {state, done, scanOnce}: `done` resolves to 'complete' (every address has mail and the campaign is
 * COMPLETED), 'stalled' (no new mail and no status change for stallMs), 'timeout' or 'aborted'.
 */
export function followCampaign({ gw, token, campaignId, addresses, watcher, startedAtMs, stallMs, timeoutMs, signal, say, label = 'campaign' }) {
  const want = new Set(addresses.map((a) => a.toLowerCase()));
  const domainPart = addresses[0] ? addresses[0].slice(addresses[0].indexOf('@')).toLowerCase() : '@';
  const state = {
    received: new Map(), // address -> messages
    distinct: 0,
    messages: 0,
    unexpected: 0, // messages to the campaign's domain for an address not in the book
    firstAtMs: null,
    lastAtMs: null,
    status: 'unknown',
    completedAtMs: null,
    campaign: undefined, // the last GET /v1/campaigns/{id} body
    polls: 0,
    pollErrors: 0,
    lastChangeMs: Date.now(),
  };
  const scanOnce = async () => {
    for (const m of await watcher.scan()) {
      for (const raw of m.rcptTo) {
        const r = raw.toLowerCase();
        if (!want.has(r)) {
          if (r.endsWith(domainPart)) state.unexpected += 1;
          continue;
        }
        const n = (state.received.get(r) ?? 0) + 1;
        state.received.set(r, n);
        if (n === 1) state.distinct += 1;
        state.messages += 1;
        state.lastChangeMs = Date.now();
        if (state.firstAtMs === null || m.receivedAtMs < state.firstAtMs) state.firstAtMs = m.receivedAtMs;
        if (state.lastAtMs === null || m.receivedAtMs > state.lastAtMs) state.lastAtMs = m.receivedAtMs;
      }
    }
  };
  const stop = new AbortController();
  const done = (async () => {
    let lastPoll = 0;
    let lastSay = Date.now();
    for (;;) {
      if (signal.aborted || stop.signal.aborted) return 'aborted';
      await scanOnce();
      if (Date.now() - lastPoll >= 1000) {
        lastPoll = Date.now();
        const res = await apiSafe(gw, 'GET', `/v1/campaigns/${campaignId}`, { token });
        state.polls += 1;
        if (res.status === 200) {
          state.campaign = res.body;
          if (res.body.status !== state.status) state.lastChangeMs = Date.now();
          state.status = res.body.status;
          if (state.status === 'COMPLETED' && state.completedAtMs === null) state.completedAtMs = Date.now();
        } else state.pollErrors += 1;
      }
      if (state.distinct === want.size && state.completedAtMs !== null) return 'complete';
      if (Date.now() - state.lastChangeMs > stallMs) return 'stalled';
      if (Date.now() - startedAtMs > timeoutMs) return 'timeout';
      if (Date.now() - lastSay >= 15_000) {
        lastSay = Date.now();
        const s = (Date.now() - startedAtMs) / 1000;
        say(`  ${label}: ${state.distinct} of ${want.size} in the sink after ${Math.round(s)} s (${Math.round((state.distinct / s) * 60)}/min), status ${state.status}`);
      }
      await sleep(250);
    }
  })();
  return { state, done, scanOnce, stop: () => stop.abort() };
}

/** The figures of a followed campaign. */
export function campaignFigures(state, { contacts, startedAtMs, outcome }) {
  const since = (t) => (t === null ? null : round((t - startedAtMs) / 1000, 1));
  const lastS = since(state.lastAtMs);
  const duplicates = [...state.received.values()].reduce((sum, n) => sum + (n > 1 ? n - 1 : 0), 0);
  return {
    outcome,
    contacts,
    inSink: state.distinct,
    missing: contacts - state.distinct,
    duplicates,
    unexpectedRecipients: state.unexpected,
    firstMessageS: since(state.firstAtMs),
    lastMessageS: lastS,
    completedS: since(state.completedAtMs),
    // From the create request (sendNow) to the last message in the sink.
    perMinute: lastS ? round((state.distinct / lastS) * 60, 0) : null,
    status: state.status,
    counters: state.campaign
      ? Object.fromEntries(['total', 'sent', 'delivered', 'bounced', 'complained'].map((k) => [k, state.campaign[k]]))
      : null,
  };
}
