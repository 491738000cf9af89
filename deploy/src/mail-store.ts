import { listSinkMessages } from './smtp-sink.js';

/** One message the embedded SMTP sink holds. */
export interface StoredMessage {
  /** The sink's id of the message. */
  id: string;
  /** When the sink received it. */
  receivedAt: Date;
  /** MAIL FROM; '' for the null sender. */
  mailFrom: string | undefined;
  /** RCPT TO. */
  rcptTo: string[];
  /** The message exactly as received. */
  raw: Buffer;
}

/**
 * The dev inbox's view of the sink's mail dir (`<MAILFLEET_DATA_DIR>/mail`), read through the sink's
 * own reader so that the inbox follows whatever layout the sink writes. Only complete messages,
 * oldest first.
 */
export async function readMailStore(mailDir: string): Promise<StoredMessage[]> {
  const messages = await listSinkMessages(mailDir);
  return messages.map((m) => ({ id: m.id, receivedAt: new Date(m.receivedAt), mailFrom: m.mailFrom, rcptTo: m.rcptTo, raw: m.raw }));
}
