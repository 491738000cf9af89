import fs from 'node:fs';
import path from 'node:path';

export type LogStream = 'stdout' | 'stderr';

/** Receives every complete line a child process writes. */
export type LogSink = (name: string, line: string, stream: LogStream) => void;

const COLORS = [36, 32, 33, 35, 34, 96, 92, 93, 95, 94, 91, 37];

export interface ConsoleLogSinkOptions {
  /** Width the `[name]` prefix is padded to; grows to fit longer names. */
  width?: number;
  /** Defaults to process.stdout. */
  out?: NodeJS.WritableStream & { isTTY?: boolean };
  /** ANSI colours; defaults to whether `out` is a TTY (and NO_COLOR is unset). */
  color?: boolean;
}

/**
 * Writes `[name]  line` to one stream. pino JSON lines go through as they are:
 * the prefix is the only decoration, so `grep`/`jq` on the output still work
 * after a `cut`.
 */
export function consoleLogSink(opts: ConsoleLogSinkOptions = {}): LogSink {
  const out = opts.out ?? process.stdout;
  const color = opts.color ?? (Boolean(out.isTTY) && !process.env['NO_COLOR']);
  let width = opts.width ?? 0;
  const colorOf = new Map<string, number>();
  return (name, line) => {
    width = Math.max(width, name.length);
    let code = colorOf.get(name);
    if (code === undefined) {
      code = COLORS[colorOf.size % COLORS.length] ?? 37;
      colorOf.set(name, code);
    }
    const label = `[${name}]`.padEnd(width + 2);
    out.write(color ? `\u001b[${code}m${label}\u001b[0m ${line}\n` : `${label} ${line}\n`);
  };
}

/** Appends each child's lines to `<dir>/<name>.log` (created on first line). */
export function fileLogSink(dir: string): LogSink {
  fs.mkdirSync(dir, { recursive: true });
  return (name, line) => {
    fs.appendFileSync(path.join(dir, `${name}.log`), `${line}\n`);
  };
}

/** Sends every line to each sink. */
export function teeLogSink(...sinks: LogSink[]): LogSink {
  return (name, line, stream) => {
    for (const sink of sinks) sink(name, line, stream);
  };
}

export const silentLogSink: LogSink = () => undefined;
