// `npm run bench`: prepare as `npm start` does, boot the platform on free ports, measure, print a table
// and write bench-results/bench-<timestamp>.json. Options: see --help and deploy/README.md (Benchmarks).
import { parseCommandLine, prepareUnlessSkipped } from '../bench/cli.mjs';

const usage = `usage: npm run bench -- [options]
  --duration S          seconds of each HTTP / insertOne / batch load (default 10)
  --connections N       concurrent connections of each load (default 10)
  --ops-emails N        single sends of the storage-operations phase (default 1000)
  --batch-connections N concurrent connections of the POST /v1/emails/batch load (default 4)
  --event-rate N        email.delivered events published per second (default 500)
  --event-duration S    seconds of event publishing (default 20)
  --event-warmup S      seconds of events for another team and webhook before the measured ones, so the event path's
                        code is compiled when the measure starts; its lags are printed beside it (default 10, 0: none)
  --send-warmup S       seconds of the POST /v1/emails load before the measured one, then a wait for its emails to
                        reach the sink, so the send path's code is compiled when the measure starts; its figures
                        are printed beside it (default 20, 0: none)
  --suppressions N      addresses on the suppression list of each sending team (the send and campaign teams) before
                        its phase, none of them a recipient: every send checks its recipients against that list
                        (default 0)
  --smtp-messages N     messages for the sink's raw accept rate (default 20000)
  --campaign-contacts N contacts of the campaign fan-out (default 10000, at most 100000)
  --campaign-timeout S  longest wait for the campaign to reach the sink (default 3600)
  --poll-ms N           analytics counter poll interval in ms (default 20)
  --feed-poll-ms N      analytics feed (GET /v1/events) poll interval in ms (default 1000)
  --drain S             seconds to wait for a backlog once a load stopped (event arrivals; default 120);
                        also how long the campaign may go without a new message before it counts as stalled
  --only events         run only the event pipeline phase (analytics counter and webhook lag)
  --only campaign       run only the campaign fan-out (with its storage operations and CPU per process)
  --only send           run only the raw insertOne rate and POST /v1/emails (with the CPU per process)
  --only batch          run only the raw insertOne rate and POST /v1/emails/batch (with the CPU per process)
  --keep                keep the temporary data dir (logs, mail) after the run
  --skip-prepare        do not install/build first (already built)`;

const { values, integer, say } = parseCommandLine({
  tag: 'bench',
  usage,
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '10' },
    'ops-emails': { type: 'string', default: '1000' },
    'batch-connections': { type: 'string', default: '4' },
    'event-rate': { type: 'string', default: '500' },
    'event-duration': { type: 'string', default: '20' },
    'event-warmup': { type: 'string', default: '10' },
    'send-warmup': { type: 'string', default: '20' },
    suppressions: { type: 'string', default: '0' },
    'smtp-messages': { type: 'string', default: '20000' },
    'campaign-contacts': { type: 'string', default: '10000' },
    'campaign-timeout': { type: 'string', default: '3600' },
    'poll-ms': { type: 'string', default: '20' },
    'feed-poll-ms': { type: 'string', default: '1000' },
    drain: { type: 'string', default: '120' },
    only: { type: 'string' },
  },
});
const positive = (name, max) => integer(name, 1, max);
const params = {
  durationS: positive('duration', 3600),
  connections: positive('connections', 1000),
  opsEmails: positive('ops-emails', 100_000),
  batchConnections: positive('batch-connections', 1000),
  eventRate: positive('event-rate', 5000),
  eventDurationS: positive('event-duration', 3600),
  eventWarmupS: integer('event-warmup', 0, 3600),
  sendWarmupS: integer('send-warmup', 0, 3600),
  suppressions: integer('suppressions', 0, 1_000_000),
  smtpMessages: positive('smtp-messages', 1_000_000),
  campaignContacts: positive('campaign-contacts', 100_000),
  campaignTimeoutS: positive('campaign-timeout', 86_400),
  pollMs: positive('poll-ms', 10_000),
  feedPollMs: positive('feed-poll-ms', 60_000),
  drainS: positive('drain', 3600),
  keep: values.keep,
  only: values.only,
};
if (params.only !== undefined && !['events', 'campaign', 'send', 'batch'].includes(params.only)) {
  process.stderr.write(`--only: 'events', 'campaign', 'send' or 'batch'\n${usage}\n`);
  process.exit(2);
}

await prepareUnlessSkipped(values, say);

const { runBench } = await import('../bench/bench.mjs');
process.exitCode = await runBench(params);
