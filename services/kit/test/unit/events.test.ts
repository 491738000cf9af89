import { describe, expect, it } from 'vitest';
import { createEvent, decodeEvent, encodeEvent, PoisonEventError, subjectFor } from '../../src/nats/events.js';
import { withOutbox } from '../../src/nats/outbox.js';

describe('events', () => {
  it('builds unique envelopes with the subject of their type', () => {
    const a = createEvent('email.delivered', 'team_1', { id: 'em_1' });
    const b = createEvent('email.delivered', 'team_1', { id: 'em_1' });
    expect(a.id).not.toBe(b.id);
    expect(a.id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(subjectFor(a.type)).toBe('mailfleet.email.delivered');
    expect(decodeEvent(encodeEvent(a))).toEqual(a);
  });

  it('refuses malformed types and payloads', () => {
    expect(() => createEvent('email delivered', 't', {})).toThrow();
    expect(() => subjectFor('mailfleet.>')).toThrow();
    expect(() => decodeEvent(new TextEncoder().encode('{'))).toThrow(PoisonEventError);
    expect(() => decodeEvent(new TextEncoder().encode('{"id":"x"}'))).toThrow(PoisonEventError);
  });

  it('adds events to an update as one $push beside the change', () => {
    const e = createEvent('domain.verified', 't', { id: 'd' });
    const u = withOutbox({ $set: { status: 'SUCCESS' }, $push: { history: 'x' } }, [e]) as Record<string, Record<string, unknown>>;
    expect(u.$set).toEqual({ status: 'SUCCESS' });
    expect(u.$push?.history).toBe('x');
    const pushed = (u.$push?.outbox as { $each: { id: string; subject: string }[] }).$each;
    expect(pushed.map((p) => [p.id, p.subject])).toEqual([[e.id, 'mailfleet.domain.verified']]);
    expect(withOutbox({ $set: { a: 1 } }, [])).toEqual({ $set: { a: 1 } });
  });
});
