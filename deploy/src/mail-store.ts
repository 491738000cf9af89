import fsp from 'node:fs/promises';
import path from 'node:path';

/** One message the embedded SMTP sink holds. */
export interface StoredMessage {
  /** The sink's id of the message (its file name without extension). */
  id: string;
  /** When the sink received it. */
  receivedAt: Date;
  /** MAIL FROM; '' for the null sender; undefined when the store did not keep the envelope. */
  mailFrom: string | undefined;
  /** RCPT TO; empty when the store did not keep the envelope. */
  rcptTo: string[];
  /** The message exactly as received. */
  raw: Buffer;
}

/**
 * The one place that reads the sink's mail dir (`<MAILFLEET_DATA_DIR>/mail`) for the dev inbox:
 * one `<id>.eml` per message, with its envelope in `<id>.json` when the sink wrote one. Only
 * complete messages are returned (the sink writes `.tmp` files and renames them). Oldest first.
 */
export async function readMailStore(mailDir: string): Promise<StoredMessage[]> {
  let names: string[];
  try {
    names = await fsp.readdir(mailDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const ids = names.filter((n) => n.endsWith('.eml')).map((n) => n.slice(0, -'.eml'.length));
  const messages: StoredMessage[] = [];
  for (const id of ids) {
    const emlPath = path.join(mailDir, `${id}.eml`);
    let raw: Buffer;
    let mtime: Date;
    try {
      [raw, mtime] = await Promise.all([fsp.readFile(emlPath), fsp.stat(emlPath).then((s) => s.mtime)]);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue; // removed meanwhile
      throw error;
    }
    let envelope: { mailFrom?: unknown; rcptTo?: unknown; receivedAt?: unknown } = {};
    try {
      envelope = JSON.parse(await fsp.readFile(path.join(mailDir, `${id}.json`), 'utf8')) as typeof envelope;
    } catch {
      // no sidecar (yet): the message alone still shows
    }
    const at = typeof envelope.receivedAt === 'string' ? new Date(envelope.receivedAt) : mtime;
    messages.push({
      id,
      receivedAt: Number.isNaN(at.getTime()) ? mtime : at,
      mailFrom: typeof envelope.mailFrom === 'string' ? envelope.mailFrom : undefined,
      rcptTo: Array.isArray(envelope.rcptTo) ? envelope.rcptTo.filter((r): r is string => typeof r === 'string') : [],
      raw,
    });
  }
  return messages.sort((a, b) => a.receivedAt.getTime() - b.receivedAt.getTime() || a.id.localeCompare(b.id));
}
