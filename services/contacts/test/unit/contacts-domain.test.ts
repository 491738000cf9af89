import { InvalidArgumentError, PoisonEventError, type EventEnvelope } from '@mailfleet/kit';
import { describe, expect, it } from 'vitest';
import { checkBookChange, checkBookName, checkEmoji } from '../../src/domain/book.js';
import { planBulkUpsert } from '../../src/domain/bulk.js';
import {
  checkChange, checkInput, checkProperties, contactEventData, createContact, deletionEvents, orThrow, resolveReason, unsubscribeContact,
  unsubscribeDetails, updateContact, type Contact,
} from '../../src/domain/contact.js';
import { unsubscribePlanFor } from '../../src/domain/delivery-events.js';
import { normaliseEmail, recipientAddress } from '../../src/domain/email.js';
import { decodeCursor, distinctValues, encodeCursor, pageWindow } from '../../src/domain/paging.js';

const T0 = new Date('2026-03-01T10:00:00.123Z');
const T1 = new Date('2026-03-01T11:00:00.456Z');

function contact(over: Partial<Contact> = {}): Contact {
  const base = createContact({ id: 'ct_1', teamId: 'team_1', contactBookId: 'cb_1', input: { email: 'ann@example.com', firstName: 'Ann', properties: { plan: 'pro' } }, now: T0 });
  return { ...base.next, ...over };
}

describe('email addresses', () => {
  it('are normalised to trimmed lower case', () => {
    expect(normaliseEmail('  Ann.Lee+news@Example.COM ')).toBe('ann.lee+news@example.com');
    expect(normaliseEmail('jörg@bücher.de')).toBe('jörg@bücher.de');
    expect(normaliseEmail('x@xn--bcher-kva.example')).toBe('x@xn--bcher-kva.example');
  });

  it.each([
    '', 'plain', '@example.com', 'ann@', 'ann@example', 'ann@@example.com', 'a@b@example.com', 'ann @example.com', 'ann@exa mple.com',
    '.ann@example.com', 'ann.@example.com', 'an..n@example.com', 'ann@-example.com', 'ann@example-.com', 'ann@example.c', 'ann@example.123',
    '"ann"@example.com', 'ann@[127.0.0.1]', `${'a'.repeat(65)}@example.com`, `a@${'b'.repeat(250)}.com`,
  ])('refuses %j', (raw) => {
    expect(normaliseEmail(raw)).toBeUndefined();
  });

  it('reads the address out of a display form', () => {
    expect(recipientAddress('Ann Lee <Ann@Example.com>')).toBe('ann@example.com');
    expect(recipientAddress('ann@example.com')).toBe('ann@example.com');
    expect(recipientAddress('Ann <nonsense>')).toBeUndefined();
  });
});

describe('contact input checks', () => {
  it('normalise the email and map empty names to null', () => {
    const r = checkInput({ email: ' Ann@Example.com', firstName: '', lastName: 'Lee', subscribed: false, properties: { a: '1' } });
    expect(r).toEqual({ ok: true, value: { email: 'ann@example.com', firstName: null, lastName: 'Lee', subscribed: false, properties: { a: '1' } } });
  });

  it('report bad fields with a code', () => {
    expect(checkInput({ email: 'nope' })).toMatchObject({ ok: false, problem: { code: 'INVALID_EMAIL' } });
    expect(checkInput({ email: '  ' })).toMatchObject({ ok: false, problem: { code: 'INVALID_EMAIL', message: 'email is required' } });
    expect(checkInput({ email: 'a@b.co', firstName: 'x'.repeat(257) })).toMatchObject({ ok: false, problem: { code: 'INVALID_NAME' } });
    expect(checkProperties({ a: 1 })).toMatchObject({ ok: false, problem: { code: 'INVALID_PROPERTIES', message: 'properties.a must be a string' } });
    expect(checkProperties({ '': 'x' })).toMatchObject({ ok: false });
    expect(checkProperties(Object.fromEntries(Array.from({ length: 201 }, (_, i) => [`k${i}`, 'v'])))).toMatchObject({ ok: false });
    expect(checkProperties({ 'a.b': 'x', $c: 'y' })).toEqual({ ok: true, value: { 'a.b': 'x', $c: 'y' } });
    expect(checkProperties({ 'a\u0000b': 'x' })).toMatchObject({ ok: false, problem: { code: 'INVALID_PROPERTIES', message: 'property names must not contain control characters' } });
    expect(checkProperties({ 'tab\there': 'x' })).toMatchObject({ ok: false });
  });

  it('throw INVALID_ARGUMENT for single-contact calls', () => {
    expect(() => orThrow(checkInput({ email: 'bad' }))).toThrow(InvalidArgumentError);
    expect(checkChange({})).toEqual({ ok: true, value: {} });
  });
});

describe('contact transitions', () => {
  it('create publishes contact.created with the public Contact object', () => {
    const t = createContact({ id: 'ct_1', teamId: 'team_1', contactBookId: 'cb_1', input: { email: 'ann@example.com' }, now: T0 });
    expect(t.next).toMatchObject({ subscribed: true, firstName: null, lastName: null, properties: {}, version: 1, unsubscribe: null });
    expect(t.events).toEqual([{
      type: 'contact.created',
      data: {
        id: 'ct_1', email: 'ann@example.com', firstName: null, lastName: null, subscribed: true, properties: {}, contactBookId: 'cb_1',
        createdAt: '2026-03-01T10:00:00.123Z', updatedAt: '2026-03-01T10:00:00.123Z',
      },
    }]);
  });

  it('creating an unsubscribed contact is an opt-out (contact.unsubscribed, MANUAL)', () => {
    const t = createContact({ id: 'ct_1', teamId: 'team_1', contactBookId: 'cb_1', input: { email: 'ann@example.com', subscribed: false }, now: T0 });
    expect(t.events.map((e) => e.type)).toEqual(['contact.created', 'contact.unsubscribed']);
    expect(t.events[1]?.data).toEqual({ contactId: 'ct_1', contactBookId: 'cb_1', email: 'ann@example.com', reason: 'MANUAL', source: null });
  });

  it('update changes only the given fields and bumps the version', () => {
    const c = contact();
    const t = updateContact(c, { lastName: 'Lee' }, T1);
    expect(t.next).toMatchObject({ firstName: 'Ann', lastName: 'Lee', properties: { plan: 'pro' }, email: 'ann@example.com', version: 2, updatedAt: T1, createdAt: T0 });
    expect(t.events.map((e) => e.type)).toEqual(['contact.updated']);
    expect(updateContact(c, { firstName: null }, T1).next.firstName).toBeNull();
    expect(updateContact(c, { properties: {} }, T1).next.properties).toEqual({});
  });

  it('an update that changes nothing writes and publishes nothing', () => {
    const c = contact();
    expect(updateContact(c, { firstName: 'Ann', properties: { plan: 'pro' }, subscribed: true }, T1)).toEqual({ next: c, events: [] });
    expect(updateContact(c, {}, T1).events).toEqual([]);
  });

  it('subscribed false through an update is a MANUAL opt-out; true re-subscribes', () => {
    const off = updateContact(contact(), { subscribed: false }, T1);
    expect(off.events.map((e) => e.type)).toEqual(['contact.updated', 'contact.unsubscribed']);
    expect(off.events[0]?.data).toMatchObject({ subscribed: false });
    expect(off.next.unsubscribe).toEqual({ reason: 'MANUAL', note: null, source: null, at: T1 });
    const again = updateContact(off.next, { subscribed: false, firstName: 'Anna' }, T1);
    expect(again.events.map((e) => e.type)).toEqual(['contact.updated']);
    expect(again.next.unsubscribe).toEqual(off.next.unsubscribe);
    const on = updateContact(off.next, { subscribed: true }, T1);
    expect(on.next).toMatchObject({ subscribed: true, unsubscribe: null });
    // The internal contact.resubscribed lets the suppressions service lift an UNSUBSCRIBE of the address.
    expect(on.events.map((e) => e.type)).toEqual(['contact.updated', 'contact.resubscribed']);
    expect(on.events[1]?.data).toEqual(on.events[0]?.data);
    const stillOn = updateContact(on.next, { subscribed: true, firstName: 'Anne' }, T1);
    expect(stillOn.events.map((e) => e.type)).toEqual(['contact.updated']);
  });

  it('unsubscribe is idempotent and carries reason and source', () => {
    const details = unsubscribeDetails('HARD_BOUNCE', undefined, 'em_1');
    const t = unsubscribeContact(contact(), details, T1);
    expect(t.events.map((e) => e.type)).toEqual(['contact.updated', 'contact.unsubscribed']);
    expect(t.events[1]?.data).toEqual({ contactId: 'ct_1', contactBookId: 'cb_1', email: 'ann@example.com', reason: 'HARD_BOUNCE', source: 'em_1' });
    expect(unsubscribeContact(t.next, unsubscribeDetails('COMPLAINT', undefined, undefined), T1)).toEqual({ next: t.next, events: [] });
  });

  it('deletion publishes the contact as it was', () => {
    const c = contact();
    expect(deletionEvents(c)).toEqual([{ type: 'contact.deleted', data: contactEventData(c) }]);
  });

  it('reasons come from the code, else from text naming one, else UNSUBSCRIBE', () => {
    expect(resolveReason('COMPLAINT', 'whatever')).toBe('COMPLAINT');
    expect(resolveReason(undefined, 'hard bounce')).toBe('HARD_BOUNCE');
    expect(resolveReason(undefined, 'Manual')).toBe('MANUAL');
    expect(resolveReason(undefined, 'campaign link')).toBe('UNSUBSCRIBE');
    expect(resolveReason(undefined, '')).toBe('UNSUBSCRIBE');
    expect(unsubscribeDetails('UNSUBSCRIBE', ' campaign link ', ' cmp_1 ')).toEqual({ reason: 'UNSUBSCRIBE', note: 'campaign link', source: 'cmp_1' });
    expect(unsubscribeDetails('MANUAL', 'manual', '')).toEqual({ reason: 'MANUAL', note: null, source: null });
    expect(() => unsubscribeDetails('MANUAL', 'x'.repeat(501), undefined)).toThrow(InvalidArgumentError);
  });
});

describe('bulk upsert planning', () => {
  it('keeps valid items, reports invalid and repeated ones by index', () => {
    const plan = planBulkUpsert([
      { email: 'a@example.com' },
      { email: 'not-an-email' },
      { email: 'A@Example.com', firstName: 'dup' },
      { email: 'b@example.com', properties: { x: 'y' } },
      { email: 'c@example.com', lastName: 'z'.repeat(300) },
    ]);
    expect(plan.items.map((i) => [i.index, i.input.email])).toEqual([[0, 'a@example.com'], [3, 'b@example.com']]);
    expect(plan.errors).toEqual([
      { index: 1, email: 'not-an-email', code: 'INVALID_EMAIL', message: 'Invalid email address: not-an-email' },
      { index: 2, email: 'A@Example.com', code: 'DUPLICATE_IN_BATCH', message: 'a@example.com already appears at index 0 of this batch' },
      { index: 4, email: 'c@example.com', code: 'INVALID_NAME', message: 'lastName must be at most 256 characters' },
    ]);
  });
});

describe('paging', () => {
  it('turns page and limit into skip and limit with defaults and a cap', () => {
    const d = { limit: 5000, max: 10_000 };
    expect(pageWindow(0, 0, d)).toEqual({ skip: 0, limit: 5000 });
    expect(pageWindow(3, 10, d)).toEqual({ skip: 20, limit: 10 });
    expect(() => pageWindow(1, 10_001, d)).toThrow('limit must be at most 10000');
    expect(() => pageWindow(-1, 1, d)).toThrow(InvalidArgumentError);
    expect(() => pageWindow(1, -5, d)).toThrow(InvalidArgumentError);
  });

  it('cursors round-trip and refuse forgeries', () => {
    const c = { createdAt: T0, id: 'ct_abcDEF123' };
    expect(decodeCursor(encodeCursor(c))).toEqual(c);
    for (const bad of ['', 'nope!', Buffer.from('x.y').toString('base64url'), Buffer.from('12.').toString('base64url')]) {
      expect(() => decodeCursor(bad)).toThrow(InvalidArgumentError);
    }
  });

  it('filter values are trimmed and deduplicated', () => {
    expect(distinctValues([' a', 'b', '', 'a '])).toEqual(['a', 'b']);
  });
});

describe('contact books', () => {
  it('need a name of at least one character', () => {
    expect(checkBookName('  News ')).toBe('News');
    expect(() => checkBookName('  ')).toThrow('name must be at least 1 character');
    expect(() => checkBookName('x'.repeat(256))).toThrow(InvalidArgumentError);
    expect(checkEmoji('🎉')).toBe('🎉');
    expect(() => checkEmoji('x'.repeat(33))).toThrow(InvalidArgumentError);
    expect(checkBookChange({ properties: { a: 'b' } })).toEqual({ properties: { a: 'b' } });
    expect(checkBookChange({})).toEqual({});
  });
});

describe('delivery events', () => {
  const envelope = (type: string, data: Record<string, unknown>): EventEnvelope => ({ id: 'evt_1', type, createdAt: T0.toISOString(), teamId: 'team_1', data });

  it('a hard bounce unsubscribes every recipient with the email id as source', () => {
    expect(unsubscribePlanFor(envelope('email.bounced', { id: 'em_1', to: ['Ann <Ann@Example.com>', 'bob@example.com', 'ann@example.com'], bounce: { type: 'Permanent' } })))
      .toEqual({ teamId: 'team_1', emails: ['ann@example.com', 'bob@example.com'], reason: 'HARD_BOUNCE', source: 'em_1' });
  });

  it('a complaint unsubscribes; a soft bounce does not', () => {
    expect(unsubscribePlanFor(envelope('email.complained', { id: 'em_2', to: ['c@example.com'] }))).toMatchObject({ reason: 'COMPLAINT', emails: ['c@example.com'] });
    expect(unsubscribePlanFor(envelope('email.bounced', { id: 'em_3', to: ['c@example.com'], bounce: { type: 'Transient' } }))).toBeUndefined();
    expect(unsubscribePlanFor(envelope('email.bounced', { id: 'em_3', to: ['c@example.com'] }))).toBeUndefined();
    expect(unsubscribePlanFor(envelope('email.delivered', { id: 'em_3', to: ['c@example.com'] }))).toBeUndefined();
  });

  it('an event without recipients is poison', () => {
    expect(() => unsubscribePlanFor(envelope('email.complained', { id: 'em_4' }))).toThrow(PoisonEventError);
    expect(() => unsubscribePlanFor(envelope('email.complained', { id: 'em_4', to: [1] }))).toThrow(PoisonEventError);
  });
});
