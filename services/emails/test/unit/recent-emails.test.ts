import { describe, expect, it } from 'vitest';
import type { EmailRecord } from '../../src/repositories/emails.repository.js';
import { createRecentEmails } from '../../src/repositories/recent-emails.js';

const rec = (id: string, version = 1) => ({ id, version }) as unknown as EmailRecord;
const content = (chars: number) => ({ text: 'x'.repeat(chars), headers: [] as [string, string][] });

describe('recent emails (memory of this process\'s writes)', () => {
  it('keeps at most maxRecords, forgetting the least recently written', () => {
    const r = createRecentEmails({ maxRecords: 2 });
    r.put(rec('a'));
    r.put(rec('b'));
    r.put(rec('a', 2));
    r.put(rec('c'));
    expect(r.get('b')).toBeUndefined();
    expect(r.get('a')?.version).toBe(2);
    expect(r.get('c')).toBeDefined();
    expect(r.size).toBe(2);
  });

  it('keeps the higher version when writes are remembered out of order', () => {
    const r = createRecentEmails();
    r.put(rec('a', 3));
    r.put(rec('a', 2));
    expect(r.get('a')?.version).toBe(3);
  });

  it('forgets records older than maxAgeMs', () => {
    let now = 0;
    const r = createRecentEmails({ maxAgeMs: 100, now: () => now });
    r.put(rec('a'));
    now = 50;
    r.put(rec('b'));
    now = 120;
    expect(r.get('a')).toBeUndefined();
    expect(r.get('b')).toBeDefined();
  });

  it('gives a content out once, keeps it across a later put of the record, and stays within maxContentChars', () => {
    const r = createRecentEmails({ maxContentChars: 100 });
    r.put(rec('a'), content(60));
    r.put(rec('b'), content(60));
    // Over the budget: b is remembered without its content (the worker reads it).
    expect(r.takeContent('b')).toBeUndefined();
    r.put(rec('a', 2));
    expect(r.takeContent('a')?.text).toHaveLength(60);
    expect(r.takeContent('a')).toBeUndefined();
    // The budget freed by the take is available again.
    r.put(rec('c'), content(90));
    expect(r.takeContent('c')?.text).toHaveLength(90);
  });
});
