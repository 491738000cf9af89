import { describe, expect, it } from 'vitest';
import { MalformedEventError, planAutoSuppression } from '../../src/domain/auto-suppression.js';

const bounced = (type: string, to: unknown = ['Bob@Example.com']) => ({
  id: 'em_1', to, bounce: { type, subType: 'General', message: '550 5.1.1 user unknown' },
});

describe('planAutoSuppression', () => {
  it('suppresses each recipient of a hard bounce as HARD_BOUNCE with the email id as source', () => {
    expect(planAutoSuppression('email.bounced', bounced('Permanent', ['Bob@Example.com', 'Jane <jane@example.com>', 'bob@example.com'])))
      .toEqual({ emails: ['bob@example.com', 'jane@example.com'], skipped: [], reason: 'HARD_BOUNCE', source: 'em_1' });
  });

  it('ignores soft and undetermined bounces', () => {
    expect(planAutoSuppression('email.bounced', bounced('Transient'))).toHaveProperty('ignored');
    expect(planAutoSuppression('email.bounced', bounced('Undetermined'))).toHaveProperty('ignored');
  });

  it('suppresses complainers as COMPLAINT', () => {
    expect(planAutoSuppression('email.complained', { id: 'em_2', to: ['c@example.com'] }))
      .toEqual({ emails: ['c@example.com'], skipped: [], reason: 'COMPLAINT', source: 'em_2' });
  });

  it('skips recipients that hold no address, keeping the rest', () => {
    expect(planAutoSuppression('email.complained', { id: 'em_3', to: ['nonsense', 42, 'ok@example.com'] }))
      .toEqual({ emails: ['ok@example.com'], skipped: ['nonsense', 42], reason: 'COMPLAINT', source: 'em_3' });
  });

  it('suppresses a contact that unsubscribed itself, and only that reason', () => {
    const data = { contactId: 'ct_1', contactBookId: 'cb_1', email: 'Reader@Example.com', reason: 'UNSUBSCRIBE', source: 'em_9' };
    expect(planAutoSuppression('contact.unsubscribed', data))
      .toEqual({ emails: ['reader@example.com'], skipped: [], reason: 'UNSUBSCRIBE', source: 'em_9' });
    expect(planAutoSuppression('contact.unsubscribed', { ...data, source: '' }))
      .toMatchObject({ reason: 'UNSUBSCRIBE', source: 'contact:ct_1' });
    for (const reason of ['MANUAL', 'HARD_BOUNCE', 'COMPLAINT', undefined]) {
      expect(planAutoSuppression('contact.unsubscribed', { ...data, reason })).toHaveProperty('ignored');
    }
  });

  it('cuts an over-long source to the stored limit', () => {
    const plan = planAutoSuppression('contact.unsubscribed', { contactId: 'ct_1', email: 'a@example.com', reason: 'UNSUBSCRIBE', source: 's'.repeat(600) });
    expect((plan as { source: string }).source).toHaveLength(500);
  });

  it('lifts the UNSUBSCRIBE of a re-subscribed contact, read through the typed contract', () => {
    expect(planAutoSuppression('contact.resubscribed', { id: 'ct_1', email: 'Jürgen@Example.com', subscribed: true, contactBookId: 'cb_1' }))
      .toEqual({ lift: 'jürgen@example.com' });
    expect(() => planAutoSuppression('contact.resubscribed', { id: 'ct_1', subscribed: true })).toThrow(MalformedEventError);
  });

  it('ignores other event types', () => {
    expect(planAutoSuppression('email.delivered', { id: 'em_1', to: ['a@example.com'] })).toHaveProperty('ignored');
  });

  it('refuses events that lack what the contract promises', () => {
    expect(() => planAutoSuppression('email.bounced', { id: 'em_1', to: ['a@example.com'] })).toThrow(MalformedEventError);
    expect(() => planAutoSuppression('email.bounced', bounced('Permanent', 'a@example.com'))).toThrow(MalformedEventError);
    expect(() => planAutoSuppression('email.bounced', { ...bounced('Permanent'), id: undefined })).toThrow(MalformedEventError);
    expect(() => planAutoSuppression('email.complained', { id: 'em_1' })).toThrow(MalformedEventError);
    expect(() => planAutoSuppression('contact.unsubscribed', { reason: 'UNSUBSCRIBE' })).toThrow(MalformedEventError);
  });
});
