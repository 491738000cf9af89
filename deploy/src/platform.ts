import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { ensureBinaries } from './binaries.js';
import { startFerretDb, type FerretDbServer } from './ferretdb.js';
import { createHealthProbe, probeHttp, type HealthProbe } from './health.js';
import { consoleLogSink, type LogSink } from './logs.js';
import { canConnect, findFreePorts, holdPorts, LOOPBACK, type HeldPort } from './net.js';
import { loadLocalSecrets } from './local-secrets.js';
import { startLocalDns, type LocalDns } from './local-dns.js';
import { startNats, type NatsServer } from './nats.js';
import { defaultDataDir, repoRoot as defaultRepoRoot } from './paths.js';
import { describeExit, ManagedProcess, type ExitInfo } from './process.js';
import { HELD_PORT_FD_ENV } from '@mailfleet/kit/held-port';

/**
 * Local mode runs only when asked for (`npm start` does) and only with the platform's own SMTP
 * sink and no DNS_SERVERS: a real relay or real DNS means records must be real too.
 */
export function localModeOn(opts: { requested: boolean | undefined; smtpUrl: string | undefined; dnsServers: string | undefined }): boolean {
  return opts.requested === true && !opts.smtpUrl && !opts.dnsServers;
}

/**
 * A profiling run: with MAILFLEET_NODE_CPU_PROF_DIR every Node child writes a V8 CPU profile there when it stops;
 * MAILFLEET_NODE_CPU_PROF_ONLY (names, comma-separated: `webhooks,gateway`) limits that to those children, so the
 * others run unprofiled.
 */
export function cpuProfileArgs(name: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const dir = env['MAILFLEET_NODE_CPU_PROF_DIR'];
  if (!dir) return [];
  const only = (env['MAILFLEET_NODE_CPU_PROF_ONLY'] ?? '').split(',').map((n) => n.trim()).filter(Boolean);
  return only.length === 0 || only.includes(name) ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}

/** The services in start order; their default gRPC ports are 50051.. and metrics ports 9101.. in this order. */
export const SERVICE_NAMES = [
  'auth',
  'domains',
  'contacts',
  'emails',
  'campaigns',
  'suppressions',
  'webhooks',
  'analytics',
] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

export const DEFAULT_PORTS = {
  gateway: 3000,
  gatewayMetrics: 9100,
  grpcBase: 50051,
  metricsBase: 9101,
  nats: 4222,
  ferretdb: 27017,
  smtpSink: 2525,
  inboundSmtp: 2526,
  /** Local mode's DNS server (UDP and TCP). */
  localDns: 5300,
} as const;

/** The domain of the return paths (VERP bounce addresses) when BOUNCE_DOMAIN is not set. */
const DEFAULT_BOUNCE_DOMAIN = 'bounces.mailfleet.local';

/** Operator variables (ARCHITECTURE.md) handed to every child as they are. */
export const PASSTHROUGH_ENV = [
  'DNS_SERVERS',
  'PUBLIC_URL',
  'INBOUND_SMTP_PORT',
  'BOUNCE_DOMAIN',
  'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
  'NODE_EXTRA_CA_CERTS',
] as const;

export interface PlatformPorts {
  gateway: number;
  gatewayMetrics: number;
  services: Record<ServiceName, { grpc: number; metrics: number }>;
  inboundSmtp: number;
  /** Only when this platform started the server (no NATS_URL / MONGO_URL / SMTP_URL given). */
  nats?: number;
  ferretdb?: number;
  smtpSink?: number;
  /** Local mode's DNS server; only in local mode with fixed ports (a free one otherwise). */
  localDns?: number;
}

export interface ChildExitReport {
  name: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  tail: string[];
  /** One paragraph: who, how, and the last lines of output. */
  message: string;
}

export interface PlatformOptions {
  /** 'default': the documented ports; 'free': free loopback ports (tests, so a running `npm start` never collides). */
  ports?: 'default' | 'free';
  /** Gateway port; default 3000 ('default') or a free one ('free'). */
  port?: number;
  /** Gateway bind address (HOST); default 127.0.0.1. */
  host?: string;
  /** Default MAILFLEET_DATA_DIR or `<repo>/.data`. Mail goes to `<dataDir>/mail`. */
  dataDir?: string;
  /** Extra environment for every child, and where MONGO_URL/NATS_URL/SMTP_URL/operator variables are looked up first. */
  env?: Record<string, string | undefined>;
  /** External servers; otherwise MONGO_URL / NATS_URL / SMTP_URL from env; otherwise embedded ones are started. */
  mongoUrl?: string;
  natsUrl?: string;
  smtpUrl?: string;
  /** LOG_LEVEL for every child; default env LOG_LEVEL or 'info'. */
  logLevel?: string;
  /** Where child output goes; default a coloured `[name]` prefix on stdout. */
  log?: LogSink;
  /** Default `<repo>/.bin`. */
  binDir?: string;
  repoRoot?: string;
  /** How long to wait for every child to be ready; default MAILFLEET_READY_TIMEOUT_MS or 60 s. */
  readyTimeoutMs?: number;
  /** SIGKILL after this long on stop; default 15 s. */
  stopTimeoutMs?: number;
  /** Called when a child exits without being asked to after startup. Default: a report through `log`. */
  onUnexpectedExit?: (report: ChildExitReport) => void;
  /** Aborting stops whatever was started and rejects. */
  signal?: AbortSignal;
  /**
   * Local mode (what `npm start` asks for): when the platform runs its own SMTP sink and no
   * DNS_SERVERS is given, it also runs an authoritative DNS server where the domains service
   * publishes each domain's records, and points DNS_SERVERS at it. Off by default, and off
   * whenever SMTP_URL or DNS_SERVERS is set.
   */
  localMode?: boolean;
}

export interface Platform {
  /** `http://127.0.0.1:PORT` */
  readonly gatewayUrl: string;
  readonly mongoUrl: string;
  readonly natsUrl: string;
  readonly smtpUrl: string;
  /** Where the embedded SMTP sink stores mail; undefined when SMTP_URL points elsewhere. */
  readonly mailDir: string | undefined;
  readonly dataDir: string;
  /** Local mode's DNS server (`address` is the DNS_SERVERS value the services got); undefined when local mode is off. */
  readonly localDns: { readonly address: string; readonly controlUrl: string } | undefined;
  readonly ports: PlatformPorts;
  /** Every child: infra first ('ferretdb', 'nats', 'smtp-sink' when embedded), the services, 'gateway'. */
  readonly names: readonly string[];
  /** The last output lines of one child. */
  logs(name: string): string[];
  /** Sends a signal (default SIGTERM) to one child; its exit is then not reported as unexpected. */
  kill(name: string, signal?: NodeJS.Signals): void;
  /** Whether a child's process is running now. */
  isRunning(name: string): boolean;
  /** Resolves once the child is not running (for example after kill); rejects after timeoutMs (default 15 s). */
  waitForExit(name: string, timeoutMs?: number): Promise<void>;
  /** Stops one child and waits until it is gone. */
  stopChild(name: string): Promise<void>;
  /** Starts a stopped child with the same ports and environment; resolves when it is ready. */
  startChild(name: string): Promise<void>;
  /** stopChild + startChild. */
  restart(name: string): Promise<void>;
  /** Gateway, then services, then SMTP sink, NATS, FerretDB; SIGKILL after the stop timeout. Idempotent. */
  stop(): Promise<void>;
}

interface Child {
  name: string;
  kind: 'infra' | 'service' | 'gateway';
  running(): boolean;
  processes(): ManagedProcess[];
  start(): Promise<void>;
  /** Resolves to 'ready' or a description of what is missing. */
  probe(): Promise<string>;
  stop(): Promise<void>;
  kill(signal: NodeJS.Signals): void;
  tail(): string[];
  close(): void;
}

/**
 * The whole platform on one machine: embedded FerretDB, NATS and SMTP sink
 * (unless external URLs are given), then one process per service and the
 * gateway. Resolves once every service reports SERVING over grpc.health.v1 and
 * the gateway answers GET /v1/health with 200. This is what `npm start` and the
 * e2e tests both run.
 */
export async function startPlatform(opts: PlatformOptions = {}): Promise<Platform> {
  const root = opts.repoRoot ?? defaultRepoRoot();
  const lookup = (key: string): string | undefined => {
    const value = opts.env && key in opts.env ? opts.env[key] : process.env[key];
    return value === undefined || value === '' ? undefined : value;
  };
  const dataDir = path.resolve(opts.dataDir ?? defaultDataDir({ ...process.env, ...opts.env }));
  const mode = opts.ports ?? 'default';
  const log = opts.log ?? consoleLogSink({ width: 12 });
  const say = (line: string): void => log('platform', line, 'stderr');
  const readyTimeoutMs = opts.readyTimeoutMs ?? Number(lookup('MAILFLEET_READY_TIMEOUT_MS') ?? 60_000);
  const stopTimeoutMs = opts.stopTimeoutMs ?? 15_000;
  const host = opts.host ?? lookup('HOST') ?? LOOPBACK;

  // Fail before starting anything when a program is not built: services are written in parallel.
  const entries = [
    ...SERVICE_NAMES.map((name) => ({ name, file: path.join(root, 'services', name, 'dist', 'main.js') })),
    { name: 'gateway', file: path.join(root, 'gateway', 'dist', 'server.js') },
  ];
  const missing = entries.filter((e) => !fs.existsSync(e.file));
  if (missing.length > 0) {
    throw new Error(
      `cannot start the platform: ${missing.length} program(s) not built:\n` +
        missing.map((m) => `  ${m.name}: ${path.relative(root, m.file)} does not exist`).join('\n') +
        '\nBuild with `npx tsc -b` (npm start does it); a service without src/main.ts is not written yet.',
    );
  }

  const external = { mongo: opts.mongoUrl ?? lookup('MONGO_URL'), nats: opts.natsUrl ?? lookup('NATS_URL'), smtp: opts.smtpUrl ?? lookup('SMTP_URL') };
  const localMode = localModeOn({ requested: opts.localMode, smtpUrl: external.smtp, dnsServers: lookup('DNS_SERVERS') });
  const ports = await choosePorts(mode, opts.port, lookup('INBOUND_SMTP_PORT'), external);
  if (localMode && mode === 'default') ports.localDns = DEFAULT_PORTS.localDns;
  if (mode === 'default') await assertPortsFree(ports, host);
  // Held from here until each service takes its own: the default gRPC ports lie in Linux's ephemeral range, where
  // any outgoing connection may be given one, and free ones could be chosen by another platform starting beside this.
  const heldGrpc = await holdPorts(SERVICE_NAMES.map((name) => ports.services[name].grpc), { onlyEphemeral: mode === 'default' });

  const gatewayHostForUrl = host === '0.0.0.0' || host === '::' ? LOOPBACK : host;
  const gatewayUrl = `http://${gatewayHostForUrl}:${ports.gateway}`;
  const mailDir = external.smtp ? undefined : path.join(dataDir, 'mail');
  await fsp.mkdir(dataDir, { recursive: true });

  const children: Child[] = [];
  let localDns: LocalDns | undefined;
  let started = false;
  let stopping = false;
  let startupFailure: Error | undefined;
  const onExit = (info: ExitInfo, tail: string[]): void => {
    if (info.expected || stopping) return;
    const report: ChildExitReport = { name: info.name, code: info.code, signal: info.signal, tail, message: describeExit(info, tail) };
    if (!started) {
      startupFailure ??= new Error(`platform failed to start: ${report.message}`);
      return;
    }
    if (opts.onUnexpectedExit) opts.onUnexpectedExit(report);
    else say(`UNEXPECTED EXIT: ${report.message}`);
  };

  const stopAll = async (): Promise<void> => {
    stopping = true;
    const byKind = (kind: Child['kind']): Child[] => children.filter((c) => c.kind === kind);
    await Promise.all(byKind('gateway').map((c) => c.stop()));
    await Promise.all(byKind('service').map((c) => c.stop()));
    // SMTP sink, NATS, FerretDB: the reverse of their start order.
    for (const c of [...byKind('infra')].reverse()) await c.stop();
    await localDns?.close();
    for (const c of children) c.close();
  };

  const abortError = (): Error | undefined =>
    startupFailure ?? (opts.signal?.aborted ? new Error('platform start aborted') : undefined);

  try {
    // Infrastructure.
    const infraNeeded = !external.mongo || !external.nats;
    if (infraNeeded) {
      await ensureBinaries({
        ...(opts.binDir ? { binDir: opts.binDir } : {}),
        only: [...(external.mongo ? [] : (['ferretdb'] as const)), ...(external.nats ? [] : (['natsServer'] as const))],
        log: say,
      });
    }
    const binDirOpt = opts.binDir ? { binDir: opts.binDir } : {};
    const infraStarts: Promise<void>[] = [];
    let mongoUrl = external.mongo;
    let natsUrl = external.nats;
    let smtpUrl = external.smtp;
    if (!external.mongo) {
      const child = infraChild('ferretdb', () =>
        startFerretDb({
          port: ports.ferretdb ?? 0,
          dataDir,
          log,
          stopTimeoutMs,
          ...binDirOpt,
          name: 'ferretdb',
          // At warn, FerretDB logs every command it lacks (endSessions on each client close).
          logLevel: lookup('FERRETDB_LOG_LEVEL') ?? 'error',
        }),
      );
      children.push(child.child);
      infraStarts.push(child.ready.then((s) => void (mongoUrl = s.url)));
    }
    if (!external.nats) {
      const child = infraChild('nats', () =>
        startNats({ port: ports.nats ?? 0, dataDir, log, stopTimeoutMs, ...binDirOpt, name: 'nats' }),
      );
      children.push(child.child);
      infraStarts.push(child.ready.then((s) => void (natsUrl = s.url)));
    }
    if (!external.smtp && mailDir) {
      const sinkPort = ports.smtpSink ?? 0;
      const sink = nodeChild({
        name: 'smtp-sink',
        kind: 'infra',
        // This package's own build, wherever repoRoot points.
        file: fileURLToPath(new URL('./smtp-sink.main.js', import.meta.url)),
        env: {
          ...process.env,
          SMTP_SINK_PORT: String(sinkPort),
          SMTP_SINK_HOST: LOOPBACK,
          SMTP_SINK_DIR: mailDir,
          // The mailbox simulator answers accepted mail with reports to the emails service's inbound listener.
          MAILBOX_SIMULATOR: lookup('MAILBOX_SIMULATOR') ?? 'true',
          SIMULATOR_REPORT_TARGET: `${LOOPBACK}:${ports.inboundSmtp}`,
        },
        probe: async () => ((await canConnect(sinkPort)) ? 'ready' : 'not accepting connections'),
      });
      children.push(sink);
      infraStarts.push(
        (async () => {
          await sink.start();
          await waitReady([sink], readyTimeoutMs, abortError);
          smtpUrl = `smtp://${LOOPBACK}:${sinkPort}`;
        })(),
      );
    }
    if (localMode) {
      localDns = await startLocalDns({ dataDir, ...(ports.localDns !== undefined ? { port: ports.localDns } : {}) });
      say(
        `LOCAL MODE: domains publish their DNS records to the local DNS server ${localDns.address} and verify against it; ` +
          'mail stays in the embedded SMTP sink (npx mailfleet inbox). Set SMTP_URL or DNS_SERVERS to turn it off.',
      );
    }
    await settleAll(infraStarts);
    if (!mongoUrl || !natsUrl || !smtpUrl) throw new Error('infrastructure URLs not resolved');
    const abort = abortError();
    if (abort) throw abort;

    // Services and gateway.
    const contractEnv: Record<string, string> = {
      MONGO_URL: mongoUrl,
      NATS_URL: natsUrl,
      SMTP_URL: smtpUrl,
      LOG_LEVEL: opts.logLevel ?? lookup('LOG_LEVEL') ?? 'info',
      MAILFLEET_DATA_DIR: dataDir,
      INBOUND_SMTP_PORT: String(ports.inboundSmtp),
      BOUNCE_DOMAIN: lookup('BOUNCE_DOMAIN') ?? DEFAULT_BOUNCE_DOMAIN,
      // ARCHITECTURE.md: tracking links default to the gateway's own address.
      PUBLIC_URL: lookup('PUBLIC_URL') ?? gatewayUrl,
    };
    for (const name of SERVICE_NAMES) {
      contractEnv[`${name.toUpperCase()}_GRPC_ADDR`] = `${LOOPBACK}:${ports.services[name].grpc}`;
    }
    const baseEnv: NodeJS.ProcessEnv = { ...process.env };
    for (const [key, value] of Object.entries(opts.env ?? {})) {
      if (value === undefined) delete baseEnv[key];
      else baseEnv[key] = value;
    }
    for (const key of PASSTHROUGH_ENV) {
      const value = lookup(key);
      if (value !== undefined) baseEnv[key] = value;
    }
    Object.assign(baseEnv, await loadLocalSecrets(dataDir, lookup), contractEnv);
    // Local mode is the platform's decision alone: an inherited value must not switch it on.
    delete baseEnv['LOCAL_DNS_CONTROL_URL'];
    delete baseEnv['MAILFLEET_LOCAL_MODE'];
    if (localDns) {
      baseEnv['DNS_SERVERS'] = localDns.address;
      baseEnv['LOCAL_DNS_CONTROL_URL'] = localDns.controlUrl;
      baseEnv['MAILFLEET_LOCAL_MODE'] = 'true';
    }

    const apps: Child[] = [];
    for (const name of SERVICE_NAMES) {
      const env: NodeJS.ProcessEnv = {
        ...baseEnv,
        SERVICE_NAME: name,
        GRPC_PORT: String(ports.services[name].grpc),
        METRICS_PORT: String(ports.services[name].metrics),
      };
      // PORT and HOST are the gateway's; a service must not mistake them for its own.
      delete env['PORT'];
      delete env['HOST'];
      const probe = createHealthProbe(`${LOOPBACK}:${ports.services[name].grpc}`);
      apps.push(
        nodeChild({
          name,
          kind: 'service',
          file: path.join(root, 'services', name, 'dist', 'main.js'),
          env,
          held: heldGrpc.get(ports.services[name].grpc),
          probe: async () => {
            const status = await probe.check('');
            return status === 'SERVING' ? 'ready' : `grpc.health.v1 Check: ${status}`;
          },
          closeProbe: probe,
        }),
      );
    }
    apps.push(
      nodeChild({
        name: 'gateway',
        kind: 'gateway',
        file: path.join(root, 'gateway', 'dist', 'server.js'),
        env: {
          ...baseEnv,
          SERVICE_NAME: 'gateway',
          PORT: String(ports.gateway),
          HOST: host,
          METRICS_PORT: String(ports.gatewayMetrics),
          // The gateway's CSRF rule accepts only PUBLIC_URL's origin when it is set. Locally the console is opened as
          // 127.0.0.1 or localhost alike, so the gateway gets PUBLIC_URL only when the operator chose one.
          PUBLIC_URL: lookup('PUBLIC_URL') ?? '',
          // The console's dev inbox reads the embedded sink's mail dir; without a sink of its own it is 404.
          MAILFLEET_DEV_INBOX_DIR: !external.smtp && mailDir ? mailDir : '',
        },
        probe: async () => {
          const status = await probeHttp(`${gatewayUrl}/v1/health`);
          return status === 'OK' ? 'ready' : `GET /v1/health: ${status}`;
        },
      }),
    );
    children.push(...apps);
    for (const app of apps) await app.start();
    say(`waiting for ${apps.length} processes to report ready (timeout ${Math.round(readyTimeoutMs / 1000)} s)`);
    await waitReady(apps, readyTimeoutMs, abortError);
    started = true;

    const find = (name: string): Child => {
      const child = children.find((c) => c.name === name);
      if (!child) throw new Error(`no child named ${name}; known: ${children.map((c) => c.name).join(', ')}`);
      return child;
    };
    let stopped: Promise<void> | undefined;
    const platform: Platform = {
      gatewayUrl,
      mongoUrl,
      natsUrl,
      smtpUrl,
      mailDir,
      dataDir,
      localDns: localDns ? { address: localDns.address, controlUrl: localDns.controlUrl } : undefined,
      ports,
      names: children.map((c) => c.name),
      logs: (name) => find(name).tail(),
      kill: (name, signal = 'SIGTERM') => find(name).kill(signal),
      isRunning: (name) => find(name).running(),
      async waitForExit(name, timeoutMs = 15_000) {
        const child = find(name);
        const deadline = Date.now() + timeoutMs;
        while (child.running()) {
          if (Date.now() >= deadline) throw new Error(`${name} still running after ${timeoutMs} ms`);
          await sleep(50);
        }
      },
      stopChild: (name) => find(name).stop(),
      async startChild(name) {
        const child = find(name);
        if (child.running()) return;
        await child.start();
        await waitReady([child], readyTimeoutMs, () =>
          child.running() ? undefined : new Error(`${name} exited while starting:\n${child.tail().join('\n')}`),
        );
      },
      async restart(name) {
        await platform.stopChild(name);
        await platform.startChild(name);
      },
      stop() {
        stopped ??= stopAll();
        return stopped;
      },
    };
    return platform;
  } catch (error) {
    await Promise.all([...heldGrpc.values()].map((held) => held.close()));
    await stopAll();
    throw error;
  }

  // --- helpers that close over the options ---

  function infraChild<S extends NatsServer | FerretDbServer>(
    name: string,
    launch: () => Promise<S>,
  ): { child: Child; ready: Promise<S> } {
    let server: S | undefined;
    let watched: ManagedProcess | undefined;
    const watch = (): void => {
      if (!server || watched === server.process) return;
      watched = server.process;
      const p = watched;
      p.onExit((info) => onExit(info, p.tail()));
    };
    const ready = launch().then((s) => {
      server = s;
      watch();
      return s;
    });
    const child: Child = {
      name,
      kind: 'infra',
      running: () => Boolean(server?.process.running),
      processes: () => (server ? [server.process] : []),
      async start() {
        if (!server) throw new Error(`${name} never started`);
        await server.start();
        watch();
      },
      probe: async () => ((await canConnect(server?.port ?? 0)) ? 'ready' : 'not accepting connections'),
      async stop() {
        // A launch still in flight must finish before it can be stopped.
        await ready.catch(() => undefined);
        await server?.stop();
      },
      kill(signal) {
        server?.process.kill(signal);
      },
      tail: () => server?.process.tail() ?? [],
      close: () => undefined,
    };
    return { child, ready };
  }

  function nodeChild(spec: {
    name: string;
    kind: Child['kind'];
    file: string;
    env: NodeJS.ProcessEnv;
    probe: () => Promise<string>;
    closeProbe?: HealthProbe;
    /** A socket bound to the child's port: the first start hands it over (as fd 3, HELD_PORT_FD_ENV) and closes this process's copy. */
    held?: HeldPort | undefined;
  }): Child {
    const proc = new ManagedProcess({
      name: spec.name,
      command: process.execPath,
      args: ['--enable-source-maps', ...cpuProfileArgs(spec.name), spec.file],
      cwd: root,
      env: spec.env,
      log,
      stopTimeoutMs,
    });
    proc.onExit((info) => onExit(info, proc.tail()));
    return {
      name: spec.name,
      kind: spec.kind,
      running: () => proc.running,
      processes: () => [proc],
      start: async () => {
        const held = spec.held;
        spec.held = undefined;
        if (!held) return proc.start();
        try {
          proc.start({ inherit: [held.fd], env: { [HELD_PORT_FD_ENV]: '3' } });
        } finally {
          await held.close();
        }
      },
      async probe() {
        if (!proc.running) return 'not running';
        return spec.probe();
      },
      async stop() {
        await proc.stop();
      },
      kill: (signal) => proc.kill(signal),
      tail: () => proc.tail(),
      close: () => spec.closeProbe?.close(),
    };
  }
}

/** Waits until every child's probe says 'ready'; the error names who is not and shows their last lines. */
async function waitReady(children: Child[], timeoutMs: number, abortReason: () => Error | undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const status = new Map<string, string>(children.map((c) => [c.name, 'not checked yet']));
  const pending = new Set(children);
  for (;;) {
    const abort = abortReason();
    if (abort) throw abort;
    await Promise.all(
      [...pending].map(async (child) => {
        const result = await child.probe();
        status.set(child.name, result);
        if (result === 'ready') pending.delete(child);
      }),
    );
    if (pending.size === 0) return;
    if (Date.now() >= deadline) {
      const details = [...pending]
        .map((c) => {
          const tail = c.tail().slice(-15);
          return `--- ${c.name}: ${status.get(c.name)} ---\n${tail.length ? tail.join('\n') : '(no output)'}`;
        })
        .join('\n');
      throw new Error(
        `platform not ready after ${Math.round(timeoutMs / 1000)} s; not ready: ${[...pending].map((c) => c.name).join(', ')}\n${details}`,
      );
    }
    await sleep(250);
  }
}

/** Like Promise.all, but waits for every promise before rejecting (so nothing is left starting). */
async function settleAll(promises: Promise<void>[]): Promise<void> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

async function choosePorts(
  mode: 'default' | 'free',
  gatewayPort: number | undefined,
  inboundFromEnv: string | undefined,
  external: { mongo: string | undefined; nats: string | undefined; smtp: string | undefined },
): Promise<PlatformPorts> {
  const count = 2 + SERVICE_NAMES.length * 2 + 4;
  const free = mode === 'free' ? await findFreePorts(count) : [];
  let next = 0;
  const pick = (fallback: number): number => (mode === 'free' ? (free[next++] ?? fallback) : fallback);
  const services = {} as PlatformPorts['services'];
  SERVICE_NAMES.forEach((name, i) => {
    services[name] = { grpc: pick(DEFAULT_PORTS.grpcBase + i), metrics: pick(DEFAULT_PORTS.metricsBase + i) };
  });
  const gateway = pick(DEFAULT_PORTS.gateway);
  const ports: PlatformPorts = {
    gateway: gatewayPort ?? gateway,
    gatewayMetrics: pick(DEFAULT_PORTS.gatewayMetrics),
    services,
    inboundSmtp: pick(DEFAULT_PORTS.inboundSmtp),
  };
  if (inboundFromEnv !== undefined) ports.inboundSmtp = Number(inboundFromEnv);
  const natsPort = pick(DEFAULT_PORTS.nats);
  const ferretPort = pick(DEFAULT_PORTS.ferretdb);
  const sinkPort = pick(DEFAULT_PORTS.smtpSink);
  if (!external.nats) ports.nats = natsPort;
  if (!external.mongo) ports.ferretdb = ferretPort;
  if (!external.smtp) ports.smtpSink = sinkPort;
  return ports;
}

/** With fixed ports, a clear message beats a child dying with EADDRINUSE. */
async function assertPortsFree(ports: PlatformPorts, host: string): Promise<void> {
  const wanted: Array<[string, number]> = [
    ['gateway', ports.gateway],
    ['gateway metrics', ports.gatewayMetrics],
    ['inbound SMTP', ports.inboundSmtp],
    ...SERVICE_NAMES.flatMap((name): Array<[string, number]> => [
      [`${name} gRPC`, ports.services[name].grpc],
      [`${name} metrics`, ports.services[name].metrics],
    ]),
  ];
  if (ports.nats !== undefined) wanted.push(['NATS', ports.nats]);
  if (ports.ferretdb !== undefined) wanted.push(['FerretDB', ports.ferretdb]);
  if (ports.smtpSink !== undefined) wanted.push(['SMTP sink', ports.smtpSink]);
  if (ports.localDns !== undefined) wanted.push(['local DNS', ports.localDns]);
  const checkHost = host === '0.0.0.0' || host === '::' ? LOOPBACK : host;
  const busy: string[] = [];
  await Promise.all(
    wanted.map(async ([what, port]) => {
      if (await canConnect(port, what === 'gateway' ? checkHost : LOOPBACK, 500)) busy.push(`${what} (${port})`);
    }),
  );
  if (busy.length > 0) {
    throw new Error(
      `ports already in use: ${busy.join(', ')}. Is another \`npm start\` running? ` +
        'Stop it, or point NATS_URL / MONGO_URL / SMTP_URL at running servers.',
    );
  }
}
