// vitest globalSetup of the `e2e` project: the whole platform once per run (see
// startE2eEnvironment). Child output goes to <dataDir>/logs/<name>.log (also to
// the console with MAILFLEET_E2E_LOGS=1); MAILFLEET_KEEP_TEST_DATA=1 keeps it.
import type { TestProject } from 'vitest/node';
import { startE2eEnvironment, type E2eProvided } from './e2e-environment.js';
import './provided.js';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const env = await startE2eEnvironment();
  for (const key of Object.keys(env.provided) as Array<keyof E2eProvided>) {
    project.provide(key, env.provided[key]);
  }
  return () => env.stop();
}
