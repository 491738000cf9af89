// `npm test`: prepare, then proto check, typecheck, lint and every vitest project, stopping at
// the first failure. Ends with a summary line `N passed, N failed`. Extra arguments go to vitest
// (`npm test -- --project unit`).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { prepare, repoRoot, run } from './prepare.mjs';

const say = (message) => process.stderr.write(`[test] ${message}\n`);

function finish(passed, failed, exitCode) {
  process.stdout.write(`\n${passed} passed, ${failed} failed\n`);
  process.exit(exitCode);
}

try {
  await prepare();
} catch (error) {
  say(`prepare failed: ${error.message}`);
  finish(0, 1, 1);
}

const steps = [
  ['proto:check', 'npm', ['run', 'proto:check']],
  // tsc -b over every workspace, then the test files (tsconfig.tests.json).
  ['typecheck', 'npm', ['run', 'typecheck']],
  ['lint', 'npm', ['run', 'lint']],
];
for (const [name, command, args] of steps) {
  say(`${name}`);
  const code = await run(command, args).catch((error) => {
    say(error.message);
    return 1;
  });
  if (code !== 0) {
    say(`${name} failed (exit ${code}); stopping here`);
    // A failed step counts as one failure so that the summary never says `0 failed` on a red run.
    finish(0, 1, code);
  }
}

const reportDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mailfleet-vitest-'));
const reportFile = path.join(reportDir, 'report.json');
const vitest = path.join(repoRoot, 'node_modules', 'vitest', 'vitest.mjs');
say('vitest run');
const code = await run(process.execPath, [
  vitest,
  'run',
  '--reporter=default',
  '--reporter=json',
  `--outputFile.json=${reportFile}`,
  ...process.argv.slice(2),
]);

let passed = 0;
let failed = 0;
try {
  const report = JSON.parse(fs.readFileSync(reportFile, 'utf8'));
  passed = report.numPassedTests ?? 0;
  failed = report.numFailedTests ?? 0;
  // A file that fails to load (or a failing global setup) has no failed test of its own.
  if (code !== 0 && failed === 0) failed = Math.max(1, report.numFailedTestSuites ?? 0);
} catch {
  if (code !== 0) failed = 1;
  say('vitest wrote no JSON report');
} finally {
  fs.rmSync(reportDir, { recursive: true, force: true });
}
finish(passed, failed, code === 0 && failed === 0 ? 0 : code || 1);
