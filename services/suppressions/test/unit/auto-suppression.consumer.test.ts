import { createEvent, createLogger, type BatchOutcome, type EventEnvelope } from '@mailfleet/kit';
import { describe, expect, it } from 'vitest';
import { createAutoSuppressionHandler } from '../../src/events/auto-suppression.consumer.js';
import { fakeProcessed, fakeSuppressions } from './fakes.js';

const log = createLogger({ service: 'suppressions-unit', level: 'silent' });

function setup() {
  const suppressions = fakeSuppressions();
  const processed = fakeProcessed();
  const handler = createAutoSuppressionHandler({ suppressions, processed });
  const handleAll = (events: EventEnvelope<unknown>[]): Promise<BatchOutcome | void> =>
    handler(events.map((e) => ({ event: e as EventEnvelope, deliveryCount: 1 })), { log });
  const handle = (e: EventEnvelope<unknown>) => handleAll([e]);
  return { suppressions, processed, handle, handleAll };
}

const hardBounce = (to: string[]) => createEvent('email.bounced', 'team_1', { id: 'em_1', to, bounce: { type: 'Permanent', subType: 'General', message: 'no such user' } });
const optOut = (email: string, at: Date) => createEvent('contact.unsubscribed', 'team_1', { contactId: 'ct_1', contactBookId: 'cb_1', email, reason: 'UNSUBSCRIBE', source: null }, at);
const optIn = (email: string, at: Date) => createEvent('contact.resubscribed', 'team_1', {
  id: 'ct_1', email, firstName: null, lastName: null, subscribed: true, properties: {}, contactBookId: 'cb_1', createdAt: at.toISOString(), updatedAt: at.toISOString(),
}, at);

describe('auto-suppression handler', () => {
  it('applies an event once: a redelivery after a DELETE does not bring the address back', async () => {
    const { suppressions, processed, handle } = setup();
    const e = hardBounce(['Bob@Example.com']);
    await handle(e);
    expect(suppressions.all()).toMatchObject([{ teamId: 'team_1', email: 'bob@example.com', reason: 'HARD_BOUNCE', source: 'em_1' }]);
    expect(processed.ids.has(e.id)).toBe(true);
    await suppressions.remove('team_1', 'bob@example.com');
    await handle(e);
    expect(suppressions.all()).toEqual([]);
  });

  it('applies a whole batch with one write', async () => {
    const { suppressions, processed, handleAll } = setup();
    const events = Array.from({ length: 20 }, (_, i) => createEvent('email.complained', 'team_1', { id: `em_${i}`, to: [`c${i}@example.com`] }));
    await handleAll(events);
    expect(suppressions.all()).toHaveLength(20);
    expect(suppressions.writes).toBe(1);
    expect(events.every((e) => processed.ids.has(e.id))).toBe(true);
  });

  it('keeps the latest reason and source when an automatic event hits an existing entry', async () => {
    const { suppressions, handle } = setup();
    await suppressions.upsert({ teamId: 'team_1', email: 'c@example.com', reason: 'MANUAL', source: undefined });
    await handle(createEvent('email.complained', 'team_1', { id: 'em_7', to: ['c@example.com'] }));
    expect(suppressions.all()).toMatchObject([{ email: 'c@example.com', reason: 'COMPLAINT', source: 'em_7' }]);
  });

  it('writes nothing for soft bounces and non-UNSUBSCRIBE contact events', async () => {
    const { suppressions, handle } = setup();
    await handle(createEvent('email.bounced', 'team_1', { id: 'em_1', to: ['a@example.com'], bounce: { type: 'Transient', subType: 'MailboxFull', message: '' } }));
    await handle(createEvent('contact.unsubscribed', 'team_1', { contactId: 'ct_1', contactBookId: 'cb', email: 'a@example.com', reason: 'MANUAL', source: 'api' }));
    expect(suppressions.all()).toEqual([]);
  });

  it('a re-subscribe lifts an earlier UNSUBSCRIBE only: other reasons and a later opt-out stay', async () => {
    const { suppressions, handleAll } = setup();
    const t = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
    await suppressions.upsert({ teamId: 'team_1', email: 'hard@example.com', reason: 'HARD_BOUNCE', source: 'em_1', now: t(0) });
    await handleAll([optOut('Jürgen@Example.com', t(1)), optIn('jürgen@example.com', t(2)), optIn('hard@example.com', t(2))]);
    expect(suppressions.all().map((s) => s.email)).toEqual(['hard@example.com']);
    // An opt-in created before an opt-out that was applied first (a redelivery) does not lift it.
    await handleAll([optOut('late@example.com', t(5))]);
    await handleAll([optIn('late@example.com', t(4))]);
    expect(suppressions.all().map((s) => s.email).sort()).toEqual(['hard@example.com', 'late@example.com']);
  });

  it('terminates malformed events alone and applies the rest of the batch', async () => {
    const { suppressions, handleAll } = setup();
    const bad = createEvent('email.bounced', 'team_1', { id: 'em_1', to: 'a@example.com', bounce: { type: 'Permanent' } });
    const noTeam = { ...hardBounce(['a@example.com']), teamId: '' };
    const good = hardBounce(['ok@example.com']);
    const outcome = await handleAll([bad, noTeam, good]);
    expect([...(outcome?.poison?.keys() ?? [])].sort()).toEqual([bad.id, noTeam.id].sort());
    expect(suppressions.all().map((s) => s.email)).toEqual(['ok@example.com']);
  });

  it('records the events only after the write, so a failed write is retried', async () => {
    const { suppressions, processed, handle } = setup();
    const original = suppressions.applyAutomatic.bind(suppressions);
    let calls = 0;
    suppressions.applyAutomatic = async (writes) => {
      if (++calls === 1) throw new Error('database went away');
      return original(writes);
    };
    const e = hardBounce(['a@example.com', 'b@example.com']);
    await expect(handle(e)).rejects.toThrow('database went away');
    expect(processed.ids.has(e.id)).toBe(false);
    await handle(e);
    expect(suppressions.all().map((s) => s.email).sort()).toEqual(['a@example.com', 'b@example.com']);
    expect(processed.ids.has(e.id)).toBe(true);
  });
});
