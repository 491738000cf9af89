import { spawn, type ChildProcess } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';
import type { Readable } from 'node:stream';
import { silentLogSink, type LogSink, type LogStream } from './logs.js';

export interface ExitInfo {
  name: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** True when stop(), kill() or restart() asked for it. */
  expected: boolean;
  /** Set when the process could not be spawned at all (for example ENOENT). */
  error?: Error;
}

export interface ManagedProcessOptions {
  name: string;
  command: string;
  args?: string[];
  cwd?: string;
  /** The complete environment of the child (not merged with process.env here). */
  env?: NodeJS.ProcessEnv;
  log?: LogSink;
  /** How many recent lines to keep for error reports. */
  tailLines?: number;
  /** SIGKILL follows SIGTERM after this long. */
  stopTimeoutMs?: number;
}

type LineListener = (line: string, stream: LogStream) => void;
type ExitListener = (info: ExitInfo) => void;

/*
 * Children run in their own process group, so a terminal's Ctrl-C reaches only
 * us and we can stop them in order. The price: when this process ends without
 * stopping them, nothing else would. So every child still running when this
 * process exits is SIGKILLed, and a terminating signal that nobody else handles
 * (vitest in run mode has no SIGINT handler) first SIGTERMs them, then takes its
 * default course. A module-level set is the one piece of global state here, on purpose.
 */
const live = new Set<ManagedProcess>();
const TERMINATING_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Prepended: a listener that calls process.exit() inside 'exit' (vitest's does) ends the
  // process on the spot, and listeners after it never run.
  process.prependListener('exit', () => {
    for (const p of live) p.kill('SIGKILL');
  });
  for (const signal of TERMINATING_SIGNALS) {
    const onSignal = (): void => {
      // Someone else (start.mjs) handles it: they stop the children in order.
      if (process.listenerCount(signal) > 1) return;
      for (const p of live) p.kill('SIGTERM');
      process.off(signal, onSignal);
      process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

/**
 * A long-running child process: prefixed line logging, a tail for error
 * reports, ordered stop with a SIGKILL fallback, and restart with the same
 * command and environment.
 */
export class ManagedProcess {
  readonly name: string;
  private readonly opts: ManagedProcessOptions;
  private readonly log: LogSink;
  private readonly tailLimit: number;
  private readonly recent: string[] = [];
  private readonly lineListeners = new Set<LineListener>();
  private readonly exitListeners = new Set<ExitListener>();
  private child: ChildProcess | undefined;
  private exitPromise: Promise<ExitInfo> | undefined;
  private expectExit = false;
  private lastExitInfo: ExitInfo | undefined;

  constructor(opts: ManagedProcessOptions) {
    this.opts = opts;
    this.name = opts.name;
    this.log = opts.log ?? silentLogSink;
    this.tailLimit = opts.tailLines ?? 40;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  /** How the last run ended, while the process is not running. */
  get lastExit(): ExitInfo | undefined {
    return this.lastExitInfo;
  }

  /** The most recent output lines (stdout and stderr interleaved). */
  tail(lines = this.tailLimit): string[] {
    return this.recent.slice(-lines);
  }

  onLine(listener: LineListener): () => void {
    this.lineListeners.add(listener);
    return () => this.lineListeners.delete(listener);
  }

  onExit(listener: ExitListener): () => void {
    this.exitListeners.add(listener);
    return () => this.exitListeners.delete(listener);
  }

  /**
   * Spawns the process. `inherit`: descriptors of this process the child gets as its fd 3, 4, …, with `env` added to
   * its environment for this start only (a restart does not pass them again).
   */
  start(once: { inherit?: number[]; env?: NodeJS.ProcessEnv } = {}): void {
    if (this.child) throw new Error(`${this.name} is already running (pid ${this.child.pid})`);
    installExitHook();
    this.expectExit = false;
    this.lastExitInfo = undefined;
    const child = spawn(this.opts.command, this.opts.args ?? [], {
      cwd: this.opts.cwd,
      env: { ...(this.opts.env ?? process.env), ...once.env },
      stdio: ['ignore', 'pipe', 'pipe', ...(once.inherit ?? [])],
      detached: true,
    });
    this.child = child;
    live.add(this);
    this.pipeLines(child.stdout, 'stdout');
    this.pipeLines(child.stderr, 'stderr');
    this.exitPromise = new Promise<ExitInfo>((resolve) => {
      let settled = false;
      const finish = (info: ExitInfo): void => {
        if (settled) return;
        settled = true;
        this.child = undefined;
        live.delete(this);
        this.lastExitInfo = info;
        for (const listener of this.exitListeners) listener(info);
        resolve(info);
      };
      child.once('error', (error) => {
        finish({ name: this.name, code: null, signal: null, expected: this.expectExit, error });
      });
      child.once('exit', (code, signal) => {
        const info: ExitInfo = { name: this.name, code, signal, expected: this.expectExit };
        // Anything the leader left in its group (which may hold our pipes open) goes with it.
        if (child.pid !== undefined) signalGroup(child.pid, 'SIGKILL');
        // Wait for 'close' so the last lines of output are read, but not forever.
        const fallback = setTimeout(() => finish(info), 2000);
        child.once('close', () => {
          clearTimeout(fallback);
          finish(info);
        });
      });
    });
  }

  /** Resolves when the current run ends (at once with the last result if not running). */
  exited(): Promise<ExitInfo> {
    if (this.exitPromise) return this.exitPromise;
    return Promise.resolve(this.lastExitInfo ?? { name: this.name, code: null, signal: null, expected: true });
  }

  /** Sends a signal to the process group; marks the exit that follows as expected. */
  kill(signal: NodeJS.Signals = 'SIGTERM'): void {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    this.expectExit = true;
    signalGroup(pid, signal);
  }

  /** SIGTERM, then SIGKILL after stopTimeoutMs; resolves once the process has exited. */
  async stop(timeoutMs = this.opts.stopTimeoutMs ?? 15_000): Promise<ExitInfo | undefined> {
    if (!this.child) return undefined;
    const exited = this.exited();
    this.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    const first = await Promise.race([exited, timeout]);
    clearTimeout(timer);
    if (first === 'timeout') {
      this.log(this.name, `did not exit within ${timeoutMs} ms of SIGTERM; sending SIGKILL`, 'stderr');
      this.kill('SIGKILL');
    }
    return exited;
  }

  async restart(): Promise<void> {
    await this.stop();
    this.start();
  }

  private pipeLines(stream: Readable | null, kind: LogStream): void {
    if (!stream) return;
    const decoder = new StringDecoder('utf8');
    let pending = '';
    const emit = (line: string): void => {
      const clean = line.endsWith('\r') ? line.slice(0, -1) : line;
      this.recent.push(clean);
      if (this.recent.length > this.tailLimit) this.recent.splice(0, this.recent.length - this.tailLimit);
      this.log(this.name, clean, kind);
      for (const listener of this.lineListeners) listener(clean, kind);
    };
    stream.on('data', (chunk: Buffer) => {
      pending += decoder.write(chunk);
      let newline = pending.indexOf('\n');
      while (newline !== -1) {
        emit(pending.slice(0, newline));
        pending = pending.slice(newline + 1);
        newline = pending.indexOf('\n');
      }
    });
    stream.on('end', () => {
      pending += decoder.end();
      if (pending) emit(pending);
      pending = '';
    });
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

/** A readable one-paragraph account of how a process ended, with its last lines. */
export function describeExit(info: ExitInfo, tail: string[]): string {
  const how = info.error
    ? `could not start: ${info.error.message}`
    : info.signal
      ? `was killed by ${info.signal}`
      : `exited with code ${info.code}`;
  const lines = tail.length > 0 ? `\n--- last ${tail.length} lines of ${info.name} ---\n${tail.join('\n')}` : ' (no output)';
  return `${info.name} ${how}${lines}`;
}

/** A server process that can be stopped, killed and started again on the same port and data. */
export interface RestartableServer {
  readonly process: ManagedProcess;
  /** Starts a stopped server again; resolves when it is ready. */
  start(): Promise<void>;
  /** SIGTERM (SIGKILL after the stop timeout); resolves when the process is gone. */
  stop(): Promise<void>;
  /** Kills without a clean shutdown (default SIGKILL) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** stop() then start(). */
  restart(): Promise<void>;
}

/** Wraps a launch function (spawn + wait until ready) into start/stop/kill/restart. */
export async function restartableServer(name: string, launch: () => Promise<ManagedProcess>): Promise<RestartableServer> {
  let proc: ManagedProcess | undefined = await launch();
  const server: RestartableServer = {
    get process() {
      if (!proc) throw new Error(`${name} is not started`);
      return proc;
    },
    async start() {
      if (proc?.running) return;
      proc = await launch();
    },
    async stop() {
      await proc?.stop();
    },
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (!proc?.running) return;
      const exited = proc.exited();
      proc.kill(signal);
      await exited;
    },
    async restart() {
      await server.stop();
      await server.start();
    },
  };
  return server;
}
