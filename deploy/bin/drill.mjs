// `npm run drill`: prepare as `npm start` does, boot the platform on free ports, send a campaign while every service is
// killed (SIGKILL) and restarted in turn and NATS restarted once, then verify that nothing was lost. Prints a table,
// writes bench-results/drill-<timestamp>.json, exits 1 on any loss. Options: see --help and deploy/README.md.
// Plain modules with no dependencies: importable before prepare has installed anything.
import { FAULT_TARGETS as TARGETS } from '../bench/drill.mjs';
import { parseCommandLine, prepareUnlessSkipped } from '../bench/cli.mjs';

const usage = `usage: npm run drill -- [options]
  --contacts N      contacts of the campaign (default 5000)
  --interval S      seconds between one fault's process being back and the next fault, the first that long after
                    mail reaches the sink (default 2)
  --down S          seconds a killed process stays down before it is started again (default 2)
  --faults LIST     comma-separated order of the faults (default ${TARGETS.join(',')})
  --drain S         how long to wait for each stage: no new mail (stall), final statuses, webhook arrivals (default 180)
  --settle S        seconds after the last fault and the last message before the final look at the sink (default 30)
  --timeout S       longest wait for the campaign to reach the sink (default 3600)
  --keep            keep the temporary data dir (logs, mail) after a passing run (a failing one is always kept)
  --skip-prepare    do not install/build first (already built)`;

const { values, integer, say } = parseCommandLine({
  tag: 'drill',
  usage,
  options: {
    contacts: { type: 'string', default: '5000' },
    interval: { type: 'string', default: '2' },
    down: { type: 'string', default: '2' },
    faults: { type: 'string', default: TARGETS.join(',') },
    drain: { type: 'string', default: '180' },
    settle: { type: 'string', default: '30' },
    timeout: { type: 'string', default: '3600' },
  },
});
const faults = values.faults.split(',').map((s) => s.trim()).filter(Boolean);
const unknown = faults.filter((f) => !TARGETS.includes(f));
if (unknown.length > 0) {
  say(`--faults: unknown ${unknown.join(', ')} (known: ${TARGETS.join(', ')})`);
  process.exit(2);
}
const params = {
  contacts: integer('contacts', 1, 100_000),
  intervalS: integer('interval', 0, 3600),
  downS: integer('down', 0, 600),
  faults,
  drainS: integer('drain', 1, 3600),
  settleS: integer('settle', 0, 3600),
  timeoutS: integer('timeout', 1, 86_400),
  keep: values.keep,
};

await prepareUnlessSkipped(values, say);

const { runDrill } = await import('../bench/drill.mjs');
process.exitCode = await runDrill(params);
