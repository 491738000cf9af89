// `npm run bench`: prepare as `npm start` does, boot the platform on free ports, measure, print a table
// and write bench-results/bench-<timestamp>.json. Options: see --help and deploy/README.md (Benchmarks).
import { parseArgs } from 'node:util';
import { prepare } from './prepare.mjs';

const say = (message) => process.stderr.write(`[bench] ${message}\n`);

const usage = `usage: npm run bench -- [options]
  --duration S          seconds of each HTTP / insertOne load (default 10)
  --connections N       concurrent connections of each load (default 10)
  --event-rate N        email.delivered events published per second (default 50)
  --event-duration S    seconds of event publishing (default 20)
  --smtp-messages N     messages for the sink's raw accept rate (default 2000)
  --poll-ms N           analytics poll interval in ms (default 20)
  --drain S             seconds to wait for a backlog once a load stopped (event arrivals; default 120)
  --keep                keep the temporary data dir (logs, mail) after the run
  --skip-prepare        do not install/build first (already built)`;

let values;
try {
  ({ values } = parseArgs({
    options: {
      duration: { type: 'string', default: '10' },
      connections: { type: 'string', default: '10' },
      'event-rate': { type: 'string', default: '50' },
      'event-duration': { type: 'string', default: '20' },
      'smtp-messages': { type: 'string', default: '2000' },
      'poll-ms': { type: 'string', default: '20' },
      drain: { type: 'string', default: '120' },
      keep: { type: 'boolean', default: false },
      'skip-prepare': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  }));
} catch (error) {
  say(`${error.message}\n${usage}`);
  process.exit(2);
}
if (values.help) {
  process.stdout.write(`${usage}\n`);
  process.exit(0);
}

const positive = (name, max) => {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n <= 0 || n > max) {
    say(`--${name} must be an integer between 1 and ${max}, got ${JSON.stringify(values[name])}`);
    process.exit(2);
  }
  return n;
};
const params = {
  durationS: positive('duration', 3600),
  connections: positive('connections', 1000),
  eventRate: positive('event-rate', 5000),
  eventDurationS: positive('event-duration', 3600),
  smtpMessages: positive('smtp-messages', 1_000_000),
  pollMs: positive('poll-ms', 10_000),
  drainS: positive('drain', 3600),
  keep: values.keep,
};

if (!values['skip-prepare']) {
  try {
    await prepare();
  } catch (error) {
    say(error.message);
    process.exit(1);
  }
}

const { runBench } = await import('../bench/bench.mjs');
process.exitCode = await runBench(params);
