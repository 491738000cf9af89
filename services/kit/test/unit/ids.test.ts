import { describe, expect, it } from 'vitest';
import { derivedId, newId, randomBase62, randomHex } from '../../src/ids.js';

describe('ids', () => {
  it('newId is the prefix, an underscore and 22 base62 characters', () => {
    expect(newId('em')).toMatch(/^em_[0-9A-Za-z]{22}$/);
  });

  it('newId sorts by creation time: its first 8 characters are the milliseconds, the other 14 random', () => {
    const t = Date.UTC(2026, 10, 28, 12, 0, 0, 0);
    const a = newId('em', t);
    const b = newId('em', t + 1);
    const c = newId('em', t + 62 ** 3);
    expect(a < b && b < c).toBe(true);
    expect(a.slice(0, 11)).toBe(newId('em', t).slice(0, 11));
    expect(a.slice(11)).not.toBe(newId('em', t).slice(11));
    // Made one after another, they come out in order whatever their random part.
    const made: string[] = [];
    for (let i = 0; i < 200; i++) made.push(newId('x', t + i * 7));
    expect([...made].sort()).toEqual(made);
    expect(newId('x', 0)).toMatch(/^x_0{8}[0-9A-Za-z]{14}$/);
  });

  it('gives the length asked for, and no two alike across many refills of the random pool', () => {
    expect(randomBase62(0)).toBe('');
    expect(randomBase62(1)).toMatch(/^[0-9A-Za-z]$/);
    expect(randomBase62(300)).toHaveLength(300);
    const seen = new Set<string>();
    // 50,000 ids use well over 200 pools of random bytes.
    for (let i = 0; i < 50_000; i++) seen.add(newId('x'));
    expect(seen.size).toBe(50_000);
  });

  it('randomHex gives two hexadecimal digits per byte, different each time', () => {
    expect(randomHex(8)).toMatch(/^[0-9a-f]{16}$/);
    expect(randomHex(0)).toBe('');
    expect(new Set(Array.from({ length: 1_000 }, () => randomHex(8))).size).toBe(1_000);
  });

  it('uses every character of the alphabet about equally often', () => {
    const counts = new Map<string, number>();
    const text = randomBase62(62 * 2_000);
    for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(62);
    // Expected 2,000 each; the standard deviation is about 44.
    for (const n of counts.values()) expect(Math.abs(n - 2_000)).toBeLessThan(400);
  });

  it('derivedId has the form of newId, the same for the same parts, different when any part differs', () => {
    const id = derivedId('sup', 'team_1', 'a@example.com');
    expect(id).toMatch(/^sup_[0-9A-Za-z]{22}$/);
    expect(derivedId('sup', 'team_1', 'a@example.com')).toBe(id);
    expect(derivedId('sup', 'team_2', 'a@example.com')).not.toBe(id);
    expect(derivedId('sup', 'team_1', 'b@example.com')).not.toBe(id);
    // Parts are kept apart: moving text from one part to the next is another id.
    expect(derivedId('sup', 'team_1a', '@example.com')).not.toBe(derivedId('sup', 'team_1', 'a@example.com'));
    const many = new Set(Array.from({ length: 10_000 }, (_, i) => derivedId('x', 'team', `u${i}@example.com`)));
    expect(many.size).toBe(10_000);
  });
});
