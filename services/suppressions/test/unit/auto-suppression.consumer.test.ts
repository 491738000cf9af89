import { createEvent, createLogger, PoisonEventError, type EventEnvelope } from '@mailfleet/kit';
import { describe, expect, it } from 'vitest';
import { createAutoSuppressionHandler } from '../../src/events/auto-suppression.consumer.js';
import { fakeProcessed, fakeSuppressions } from './fakes.js';

const log = createLogger({ service: 'suppressions-unit', level: 'silent' });
const meta = { deliveryCount: 1, log };

function setup() {
  const suppressions = fakeSuppressions();
  const processed = fakeProcessed();
  const handle = (e: EventEnvelope<unknown>) => createAutoSuppressionHandler({ suppressions, processed })(e as EventEnvelope, meta);
  return { suppressions, processed, handle };
}

const hardBounce = (to: string[]) => createEvent('email.bounced', 'team_1', { id: 'em_1', to, bounce: { type: 'Permanent', subType: 'General', message: 'no such user' } });

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
    expect(suppressions.writes).toBe(0);
  });

  it('terminates malformed events instead of retrying them', async () => {
    const { handle } = setup();
    await expect(handle(createEvent('email.bounced', 'team_1', { id: 'em_1', to: 'a@example.com', bounce: { type: 'Permanent' } }))).rejects.toBeInstanceOf(PoisonEventError);
    await expect(handle({ ...hardBounce(['a@example.com']), teamId: '' })).rejects.toBeInstanceOf(PoisonEventError);
  });

  it('records the event only after every address is written, so a failed write is retried', async () => {
    const { suppressions, processed, handle } = setup();
    const original = suppressions.upsert.bind(suppressions);
    let calls = 0;
    suppressions.upsert = async (input) => {
      if (++calls === 2) throw new Error('database went away');
      return original(input);
    };
    const e = hardBounce(['a@example.com', 'b@example.com']);
    await expect(handle(e)).rejects.toThrow('database went away');
    expect(processed.ids.has(e.id)).toBe(false);
    await handle(e);
    expect(suppressions.all().map((s) => s.email).sort()).toEqual(['a@example.com', 'b@example.com']);
    expect(processed.ids.has(e.id)).toBe(true);
  });
});
