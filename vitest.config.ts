import { defineConfig } from 'vitest/config';

const exclude = ['**/node_modules/**', '**/dist/**'];

/**
 * Three projects: unit (no I/O, fakes through factories), integration (real
 * FerretDB, NATS, SMTP, DNS and HTTPS peers started once per run) and e2e (the
 * whole platform booted as `npm start` does, driven over HTTP).
 */
export default defineConfig({
  test: {
    // Two cores: test files run two at a time against the shared servers, each with its own database.
    maxWorkers: 2,
    minWorkers: 1,
    projects: [
      {
        test: {
          name: 'unit',
          include: ['**/test/unit/**/*.test.ts'],
          exclude,
          environment: 'node',
        },
      },
      {
        test: {
          name: 'integration',
          include: ['**/test/integration/**/*.test.ts'],
          exclude,
          environment: 'node',
          globalSetup: ['services/testkit/src/global-setup.integration.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          // expect.poll waits 1 s by default: too little for a busy machine's servers.
          expect: { poll: { timeout: 10_000 } },
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['**/test/e2e/**/*.test.ts'],
          exclude,
          environment: 'node',
          globalSetup: ['services/testkit/src/global-setup.e2e.ts'],
          testTimeout: 60_000,
          hookTimeout: 180_000,
          expect: { poll: { timeout: 10_000 } },
          // One platform per run: e2e files take turns in one worker.
          poolOptions: { forks: { singleFork: true } },
        },
      },
    ],
  },
});
