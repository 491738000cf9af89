// The one way `npm run bench`, `npm run drill` and `npm run fuzz` boot the platform: startPlatform on free ports
// with a temp data dir, a loopback DNS server (DNS_SERVERS), a test CA (NODE_EXTRA_CA_CERTS) so HTTPS webhook
// receivers on loopback are trusted, cleanup on success, error, Ctrl-C and SIGTERM; plus the helpers every
// one of them needs (teams through the CLI, a verified sending domain, an HTTPS receiver).
/* global AbortController */
import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { startArrivalReceiver } from './arrival-receiver.mjs';
import { api, round, runCli } from './lib.mjs';

export const repoRoot = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
export const FAMILIES = ['SEND_EMAIL', 'BATCH_EMAIL', 'READ_EMAIL', 'FEEDBACK_LIST', 'CONTACT', 'BULK_CONTACT', 'DEFAULT'];

const imp = (rel) => import(new URL(`file://${path.join(repoRoot, rel)}`).href);

/** ISO time as a file-name part. */
export const fileStamp = (d) => d.toISOString().replace(/[:.]/g, '-');

/**
 * Boots the platform, runs `body(session)` and stops everything; resolves to the exit code `body` returned
 * (1 when it threw). The temp dir (data, mail, logs under `logs/`) is removed unless `keep` is set or the run
 * failed (exit code other than 0, or an error). Ctrl-C / SIGTERM stop the platform and exit 130.
 *
 * With `ferretdbStats` the FerretDB launcher writes its per-command statistics to `session.ferretdbStatsFile`
 * (in the temp dir; the launcher reads MAILFLEET_FERRETDB_STATS from the environment it inherits).
 *
 * session: {platform, gw, dns, ca, dataDir, logDir, signal, bootSeconds, checkAbort(), defer(fn),
 *           newTeam(name), verifiedDomain(token, label), startReceiver(), startArrivalReceiver(onArrivals), cliEnv,
 *           ferretdbStatsFile}
 */
export async function withPlatform({ tag, keep = false, env = {}, say, ferretdbStats = false }, body) {
  const { startPlatform, fileLogSink, DOMAIN_VERIFY_TEST_CLOCK } = await imp('deploy/dist/index.js');
  const { startDnsServer } = await imp('services/testkit/dist/dns-server.js');
  const { createTestCa } = await imp('services/testkit/dist/test-ca.js');
  const { startHttpsReceiver } = await imp('services/testkit/dist/https-receiver.js');

  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), `mailfleet-${tag}-`));
  const logDir = path.join(dataDir, 'logs');
  const stopper = new AbortController();
  const deferred = []; // cleanups of what the body started, run last-first before the platform stops
  let platform;
  let dns;
  let cleaned;
  const cleanup = (keepData) =>
    (cleaned ??= (async () => {
      for (const fn of deferred.reverse()) await Promise.resolve().then(fn).catch(() => undefined);
      await platform?.stop().catch((e) => say(`platform stop failed: ${e.message}`));
      await dns?.close().catch(() => undefined);
      if (keepData) say(`data and logs kept in ${dataDir}`);
      else await fsp.rm(dataDir, { recursive: true, force: true });
    })());
  const onSignal = (signal) => {
    if (stopper.signal.aborted) process.exit(130);
    say(`${signal}: stopping the platform`);
    stopper.abort();
    cleanup(keep).finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const ca = await createTestCa({ dir: path.join(dataDir, 'ca') });
    dns = await startDnsServer();
    say(`starting the platform (data in ${dataDir}, logs in ${logDir})`);
    const ferretdbStatsFile = ferretdbStats ? path.join(dataDir, 'ferretdb-stats.json') : undefined;
    if (ferretdbStatsFile) process.env['MAILFLEET_FERRETDB_STATS'] = ferretdbStatsFile;
    const bootStart = performance.now();
    platform = await startPlatform({
      ports: 'free',
      dataDir,
      log: fileLogSink(logDir),
      signal: stopper.signal,
      env: {
        DNS_SERVERS: dns.address,
        NODE_EXTRA_CA_CERTS: ca.caFile,
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        LOG_LEVEL: process.env['LOG_LEVEL'] ?? 'warn',
        ...DOMAIN_VERIFY_TEST_CLOCK,
        ...env,
      },
      onUnexpectedExit: (report) => say(`UNEXPECTED EXIT: ${report.message}`),
    });
    const bootSeconds = round((performance.now() - bootStart) / 1000, 1);
    say(`platform ready in ${bootSeconds} s: ${platform.gatewayUrl}`);

    const gw = platform.gatewayUrl;
    const cliEnv = { AUTH_GRPC_ADDR: `127.0.0.1:${platform.ports.services.auth.grpc}`, DOMAINS_GRPC_ADDR: `127.0.0.1:${platform.ports.services.domains.grpc}` };
    const session = {
      platform,
      gw,
      dns,
      ca,
      dataDir,
      logDir,
      cliEnv,
      bootSeconds,
      ferretdbStatsFile,
      signal: stopper.signal,
      checkAbort() {
        if (stopper.signal.aborted) throw new Error('interrupted');
      },
      /** Runs `fn` at cleanup, before the platform stops (last registered first). */
      defer(fn) {
        deferred.push(fn);
      },
      /** A team and its FULL token through the CLI, every rate-limit family at 1,000,000, daily 100,000,000, no monthly quota. */
      async newTeam(name) {
        const team = JSON.parse(await runCli(repoRoot, ['team', 'create', '--name', name, '--json'], cliEnv));
        const limits = FAMILIES.flatMap((f) => ['--rate-limit', `${f}=1000000`]);
        await runCli(repoRoot, ['team', 'update', '--team', team.teamId, ...limits, '--daily', '100000000', '--monthly=-1'], cliEnv);
        return team;
      },
      /**
       * A domain of the team, its records published on this DNS server, verified. Resolves to
       * {available: true, name, id} or {available: false, reason}.
       */
      async verifiedDomain(token, label) {
        const name = `${label}-${randomBytes(4).toString('hex')}.mailfleet-bench.test`;
        const created = await api(gw, 'POST', '/v1/domains', { token, body: { name, region: 'us-east-1' } });
        if (created.status !== 200) return { available: false, reason: `POST /v1/domains answered ${created.status} ${JSON.stringify(created.body)}` };
        for (const r of created.body.dnsRecords ?? []) {
          if (r.type === 'MX') dns.setRecords(r.name, 'MX', [{ priority: Number(r.priority), exchange: r.value }]);
          else dns.setRecords(r.name, 'TXT', [r.value]);
        }
        await api(gw, 'PUT', `/v1/domains/${created.body.id}/verify`, { token });
        let status = 'unknown';
        for (let i = 0; i < 120 && !stopper.signal.aborted; i++) {
          status = (await api(gw, 'GET', `/v1/domains/${created.body.id}`, { token })).body?.status;
          if (status === 'SUCCESS' || status === 'FAILED') break;
          await sleep(250);
        }
        if (status !== 'SUCCESS') return { available: false, reason: `domain verification ended in ${status}` };
        return { available: true, name, id: created.body.id };
      },
      /** An HTTPS receiver on loopback signed by the CA the platform trusts; closed at cleanup. */
      async startReceiver() {
        const receiver = await startHttpsReceiver({ ca });
        deferred.push(() => receiver.close());
        return receiver;
      },
      /** The same, on a thread of its own that only notes first arrivals by event id (arrival-receiver.mjs). */
      async startArrivalReceiver(onArrivals) {
        const receiver = await startArrivalReceiver({ repoRoot, caDir: ca.dir, onArrivals });
        deferred.push(() => receiver.close());
        return receiver;
      },
    };

    const code = await body(session);
    await cleanup(keep || code !== 0);
    return code;
  } catch (error) {
    if (!stopper.signal.aborted) {
      say(`failed: ${error.stack ?? error.message}`);
      say(`platform logs: ${logDir}`);
      await cleanup(true);
    }
    return 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
