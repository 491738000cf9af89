// The pure parts of the contacts and campaigns pages: CSV reading/writing, import chunks, placeholders, schedule preview.
import { describe, expect, it } from 'vitest';
import { resolveSchedule } from '../../src/pages/campaigns/schedule.js';
import { chunks, contactsToCsv, parseContactsCsv } from '../../src/pages/contacts/csv.js';
import { contactValues, fillPlaceholders, placeholdersOf } from '../../src/pages/shared/placeholders.js';

describe('contacts CSV', () => {
  it('maps the usual header spellings, quotes, subscribed words and other columns as properties', () => {
    const csv = '\uFEFFEmail Address,First Name,last_name,Subscribed,plan,city\n' +
      'a@x.test,Ann,"Lee, Jr",no,pro,\n' +
      'b@x.test,,,yes,,Paris\n' +
      '\n' +
      ' c@x.test ,Cy,Doe,maybe,free,Rome\n';
    const { rows, problems } = parseContactsCsv(csv);
    expect(problems).toEqual([]);
    expect(rows).toEqual([
      { email: 'a@x.test', firstName: 'Ann', lastName: 'Lee, Jr', subscribed: false, properties: { plan: 'pro' } },
      { email: 'b@x.test', subscribed: true, properties: { city: 'Paris' } },
      // An unknown subscribed word is left to the API's default, not guessed.
      { email: 'c@x.test', firstName: 'Cy', lastName: 'Doe', properties: { plan: 'free', city: 'Rome' } },
    ]);
  });

  it('refuses a file without an email column, naming line 1', () => {
    expect(parseContactsCsv('name,phone\nAnn,1\n')).toEqual({ rows: [], problems: [{ line: 1, message: 'The header line has no "email" column' }] });
  });

  it('keeps a row whose email is empty (the API names it with its line) instead of dropping it', () => {
    expect(parseContactsCsv('email,firstName\n,Ann\n').rows).toEqual([{ email: '', firstName: 'Ann' }]);
  });

  it('exports the columns an import reads back', () => {
    const out = contactsToCsv([
      { email: 'a@x.test', firstName: 'Ann', lastName: 'Lee, Jr', subscribed: false, properties: { plan: 'pro' } },
      { email: 'b@x.test', firstName: null, lastName: null, subscribed: true, properties: { city: 'Paris' } },
    ]);
    expect(out.split(/\r?\n/)).toEqual(['email,firstName,lastName,subscribed,city,plan', 'a@x.test,Ann,"Lee, Jr",false,,pro', 'b@x.test,,,true,Paris,']);
    expect(parseContactsCsv(out).rows[0]).toEqual({ email: 'a@x.test', firstName: 'Ann', lastName: 'Lee, Jr', subscribed: false, properties: { plan: 'pro' } });
  });

  it('splits 1,001 rows into 11 requests of at most 100, in order', () => {
    const parts = chunks(Array.from({ length: 1001 }, (_, i) => i), 100);
    expect(parts.map((p) => p.length)).toEqual([100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 1]);
    expect(parts.flat()).toEqual(Array.from({ length: 1001 }, (_, i) => i));
  });
});

describe('placeholders', () => {
  it('lists the names used, once, in order, with the spacing the platform accepts', () => {
    expect(placeholdersOf('Hi {{ firstName }}', '<p>{{properties.plan}} {{firstName}}</p>', null, '{{service_unsubscribe_url}}')).toEqual([
      'firstName', 'properties.plan', 'service_unsubscribe_url',
    ]);
  });

  it('fills a contact\'s values, escaped in HTML, missing properties empty, unknown names kept', () => {
    const c = { email: 'a@x.test', firstName: '<b>Ann</b>', lastName: null, properties: { plan: 'pro' } };
    const text = '{{firstName}}|{{lastName}}|{{properties.plan}}|{{properties.city}}|{{other}}|{{service_unsubscribe_url}}';
    const values = contactValues(c, placeholdersOf(text), 'https://u/x?a=1&b=2');
    expect(fillPlaceholders(text, values, true)).toBe('&lt;b&gt;Ann&lt;/b&gt;||pro||{{other}}|https://u/x?a=1&amp;b=2');
    expect(fillPlaceholders(text, values, false)).toBe('<b>Ann</b>||pro||{{other}}|https://u/x?a=1&b=2');
  });
});

describe('schedule preview', () => {
  const now = new Date('2026-03-10T10:00:00Z');
  it('reads words forward from now in UTC (the platform\'s default zone), ISO 8601 without an offset as UTC, and nothing from nonsense', () => {
    expect(resolveSchedule('in 2 hours', now)?.getTime()).toBe(now.getTime() + 2 * 3600_000);
    expect(resolveSchedule('tomorrow at 9am', now)?.toISOString()).toBe('2026-03-11T09:00:00.000Z');
    // 9am already passed today: forward to tomorrow, as the service reads it.
    expect(resolveSchedule('9am', now)?.toISOString()).toBe('2026-03-11T09:00:00.000Z');
    expect(resolveSchedule('2026-04-01T08:30:00Z', now)?.toISOString()).toBe('2026-04-01T08:30:00.000Z');
    expect(resolveSchedule('2026-04-01T08:30', now)?.toISOString()).toBe('2026-04-01T08:30:00.000Z');
    expect(resolveSchedule('2026-04-01T08:30:00+02:00', now)?.toISOString()).toBe('2026-04-01T06:30:00.000Z');
    expect(resolveSchedule('when pigs fly', now)).toBeNull();
    expect(resolveSchedule('  ', now)).toBeNull();
  });
});
