import { describe, expect, it } from 'vitest';
import { bookCursorAfter, decodeBookCursor, encodeBookCursor } from '../../src/book-cursor.js';
import { InvalidArgumentError } from '../../src/errors.js';

describe('book cursor', () => {
  it('round-trips a position in id order and one in creation order, and keeps them apart', () => {
    const byId = encodeBookCursor({ id: 'ct_0abc' });
    const byCreation = encodeBookCursor({ createdAt: new Date(1_764_000_000_123), id: 'ct_0abc' });
    expect(byId).not.toBe(byCreation);
    expect(decodeBookCursor(byId)).toEqual({ id: 'ct_0abc' });
    expect(decodeBookCursor(byCreation)).toEqual({ createdAt: new Date(1_764_000_000_123), id: 'ct_0abc' });
  });

  it('refuses what it did not make', () => {
    for (const raw of ['forged', '', 'a.b.c', Buffer.from('x.ct_1').toString('base64url'), Buffer.from('i.').toString('base64url'), Buffer.from('i.ct-1').toString('base64url')]) {
      expect(() => decodeBookCursor(raw)).toThrow(InvalidArgumentError);
    }
  });

  it('gives the next cursor in the order of the one a page was asked with', () => {
    const at = new Date(1_764_000_000_000);
    expect(bookCursorAfter(undefined, 'ct_2', at)).toEqual({ id: 'ct_2' });
    expect(bookCursorAfter({ id: 'ct_1' }, 'ct_2', at)).toEqual({ id: 'ct_2' });
    expect(bookCursorAfter({ createdAt: new Date(1), id: 'ct_1' }, 'ct_2', at)).toEqual({ createdAt: at, id: 'ct_2' });
  });
});
