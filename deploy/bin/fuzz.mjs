// `npm run fuzz`: prepare as `npm start` does, install schemathesis from PyPI into .data/schemathesis-venv (once), then
// in a network namespace of its own (only loopback: nothing a fuzzed webhook URL names can be reached) boot the
// platform on free ports, create a team and run schemathesis against /v1/openapi.json with its key. Fails on any
// 5xx or schema mismatch. Prints a table, writes bench-results/fuzz-<timestamp>.{json,log,junit.xml}.
import { randomInt } from 'node:crypto';
import { spawn } from 'node:child_process';
// Plain modules with no dependencies: importable before prepare has installed anything.
import { canUnshareNet, ensureSchemathesis, loopbackUp } from '../bench/fuzz.mjs';
import { parseCommandLine, prepareUnlessSkipped } from '../bench/cli.mjs';

/** The operations that make the platform call out to a URL the request names: without a namespace they are not fuzzed. */
const CALLS_OUT = ['POST /v1/webhooks', 'PATCH /v1/webhooks/{id}', 'POST /v1/webhooks/{id}/test', 'POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry'];

const usage = `usage: npm run fuzz -- [options] [-- schemathesis options]
  --max-examples N  test cases per operation and phase (default 25)
  --workers N       concurrent schemathesis workers (default 2)
  --seed N          random seed (default: a new one, printed; give it to repeat a run)
  --phases LIST     schemathesis phases (default: all of examples,coverage,fuzzing,stateful)
  --timeout S       stop schemathesis after this long (default 900)
  --no-netns        run without a network namespace of its own; the operations that call out
                    (${CALLS_OUT.join(', ')}) are then excluded
  --keep            keep the temporary data dir (logs) after a passing run
  --skip-prepare    do not install/build first (already built)
Anything after a second -- goes to schemathesis run, e.g. -- --include-tag Emails`;

const { values, positionals, integer, say } = parseCommandLine({
  tag: 'fuzz',
  usage,
  allowPositionals: true,
  options: {
    'max-examples': { type: 'string', default: '25' },
    workers: { type: 'string', default: '2' },
    seed: { type: 'string' },
    phases: { type: 'string' },
    timeout: { type: 'string', default: '900' },
    'no-netns': { type: 'boolean', default: false },
    'in-netns': { type: 'boolean', default: false }, // internal: this is the re-run inside the namespace
  },
});
if (values.seed === undefined) values.seed = String(randomInt(1, 2 ** 31 - 1));

if (!values['in-netns']) {
  await prepareUnlessSkipped(values, say);
  try {
    await ensureSchemathesis();
  } catch (error) {
    say(error.message);
    process.exit(1);
  }
  if (!values['no-netns']) {
    if (await canUnshareNet()) {
      // The same command again inside `unshare --net`, with the seed fixed and nothing left to prepare.
      const args = process.argv.slice(2).filter((a) => a !== '--skip-prepare');
      const dashes = args.indexOf('--');
      const own = dashes < 0 ? args : args.slice(0, dashes);
      const rest = dashes < 0 ? [] : args.slice(dashes);
      const child = spawn('unshare', ['--net', process.execPath, process.argv[1], ...own, '--seed', values.seed, '--skip-prepare', '--in-netns', ...rest], { stdio: 'inherit' });
      // Ctrl-C reaches the child too (same process group); wait for it to stop its platform.
      const ignore = () => undefined;
      process.on('SIGINT', ignore);
      process.on('SIGTERM', () => child.kill('SIGTERM'));
      child.once('close', (code, signal) => process.exit(code ?? (signal ? 130 : 1)));
      await new Promise(() => undefined);
    }
    say('cannot make a network namespace (unshare --net): running in this one, without the operations that call out');
    values['no-netns'] = true;
  }
} else {
  await loopbackUp();
  say('in a network namespace of its own: only loopback');
}

const params = {
  bin: await ensureSchemathesis(),
  maxExamples: integer('max-examples', 1, 100_000),
  workers: integer('workers', 1, 64),
  seed: integer('seed', 0, 2 ** 53),
  phases: values.phases,
  timeoutS: integer('timeout', 1, 86_400),
  keep: values.keep,
  exclude: values['no-netns'] ? CALLS_OUT : [],
  extra: positionals,
};
const { runFuzz } = await import('../bench/fuzz.mjs');
process.exitCode = await runFuzz(params);
