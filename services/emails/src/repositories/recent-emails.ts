import type { EmailContent, EmailRecord } from './emails.repository.js';

/**
 * The emails this process wrote last, as it wrote them: what its accept inserted (with the rendered content,
 * which the send worker needs once) and the record after each of its compare-and-sets (which a delivery report
 * soon after needs). Memory only and bounded; a miss is a read. Every use is safe with a stale entry by
 * construction of its caller: a write from it is a compare-and-set on the version (a stale one loses and is
 * computed again from a read), and the worker sends from an accept's record only when the queue entry proves
 * nothing changed the email since (see `QueueEntry.untouched`).
 */
export interface RecentEmails {
  /**
   * Remembers an email's record (its content too, when given; otherwise a content remembered before is kept
   * until used). A record older than the one remembered (a lower version) is ignored.
   */
  put(record: EmailRecord, content?: EmailContent): void;
  /** The record remembered for the email, if any. */
  get(id: string): EmailRecord | undefined;
  /** The content remembered with the accept's record, given out once (a retry reads it again). */
  takeContent(id: string): EmailContent | undefined;
  forget(id: string): void;
  readonly size: number;
}

export interface RecentEmailsLimits {
  /** Records kept at most (the oldest written go first). */
  readonly maxRecords?: number;
  /** Total characters of remembered contents (HTML + text + headers) at most; an accept past it is not remembered. */
  readonly maxContentChars?: number;
  /** A record older than this is forgotten (reports and first sends come well within it). */
  readonly maxAgeMs?: number;
  readonly now?: () => number;
}

interface Slot {
  record: EmailRecord;
  content: EmailContent | undefined;
  chars: number;
  at: number;
}

function charsOf(c: EmailContent): number {
  let n = (c.html?.length ?? 0) + (c.text?.length ?? 0);
  for (const [k, v] of c.headers) n += k.length + v.length;
  return n;
}

export function createRecentEmails(limits: RecentEmailsLimits = {}): RecentEmails {
  const maxRecords = limits.maxRecords ?? 10_000;
  const maxChars = limits.maxContentChars ?? 16 * 1024 * 1024;
  const maxAgeMs = limits.maxAgeMs ?? 5 * 60_000;
  const clock = limits.now ?? Date.now;
  // A Map keeps insertion order: re-inserting on every put makes the first key the least recently written.
  const slots = new Map<string, Slot>();
  let chars = 0;

  function drop(id: string): void {
    const s = slots.get(id);
    if (!s) return;
    chars -= s.chars;
    slots.delete(id);
  }
  function trim(now: number): void {
    for (const [id, s] of slots) {
      if (slots.size > maxRecords || now - s.at > maxAgeMs) drop(id);
      else break;
    }
  }

  return {
    put(record, content) {
      const now = clock();
      const before = slots.get(record.id);
      // Two writes' answers may come back out of order: the record of the later version stays.
      if (before && before.record.version > record.version) return;
      let kept = content ?? before?.content;
      let size = kept ? charsOf(kept) : 0;
      drop(record.id);
      if (size > 0 && chars + size > maxChars) {
        kept = undefined;
        size = 0;
      }
      slots.set(record.id, { record, content: kept, chars: size, at: now });
      chars += size;
      trim(now);
    },
    get(id) {
      const s = slots.get(id);
      if (!s) return undefined;
      if (clock() - s.at > maxAgeMs) {
        drop(id);
        return undefined;
      }
      return s.record;
    },
    takeContent(id) {
      const s = slots.get(id);
      if (!s?.content) return undefined;
      const c = s.content;
      chars -= s.chars;
      s.content = undefined;
      s.chars = 0;
      return c;
    },
    forget: drop,
    get size() {
      return slots.size;
    },
  };
}
