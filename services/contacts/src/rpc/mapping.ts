import { contactsV1 } from '@mailfleet/proto';
import type { ContactBook } from '../domain/book.js';
import type { Contact, ContactChange, UnsubscribeReason } from '../domain/contact.js';
import type { UnsubscribedContact } from '../repositories/contacts.repository.js';

const REASONS: Record<UnsubscribeReason, contactsV1.UnsubscribeReason> = {
  UNSUBSCRIBE: contactsV1.UnsubscribeReason.UNSUBSCRIBE_REASON_UNSUBSCRIBE,
  HARD_BOUNCE: contactsV1.UnsubscribeReason.UNSUBSCRIBE_REASON_HARD_BOUNCE,
  COMPLAINT: contactsV1.UnsubscribeReason.UNSUBSCRIBE_REASON_COMPLAINT,
  MANUAL: contactsV1.UnsubscribeReason.UNSUBSCRIBE_REASON_MANUAL,
};

export function reasonToProto(r: UnsubscribeReason): contactsV1.UnsubscribeReason {
  return REASONS[r];
}

/** UNSPECIFIED (and unknown values) give undefined: the caller derives the reason. */
export function reasonFromProto(r: contactsV1.UnsubscribeReason): UnsubscribeReason | undefined {
  return (Object.entries(REASONS) as [UnsubscribeReason, contactsV1.UnsubscribeReason][]).find(([, v]) => v === r)?.[0];
}

export function contactToProto(c: Contact): contactsV1.Contact {
  return {
    id: c.id,
    email: c.email,
    firstName: c.firstName ?? undefined,
    lastName: c.lastName ?? undefined,
    subscribed: c.subscribed,
    properties: { ...c.properties },
    contactBookId: c.contactBookId,
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
  };
}

export function bookToProto(b: ContactBook): contactsV1.ContactBook {
  return {
    id: b.id, name: b.name, emoji: b.emoji, teamId: b.teamId, properties: { ...b.properties }, createdAt: b.createdAt, updatedAt: b.updatedAt,
  };
}

export function unsubscribeToProto(u: UnsubscribedContact): contactsV1.Unsubscribe {
  return {
    contactId: u.contact.id,
    email: u.contact.email,
    firstName: u.contact.firstName ?? '',
    lastName: u.contact.lastName ?? '',
    reason: u.note ?? u.reason,
    contactBookId: u.contact.contactBookId,
    createdAt: u.at,
    reasonCode: reasonToProto(u.reason),
    source: u.source ?? undefined,
  };
}

/** A ContactInput from the wire: an empty first or last name means "no name". */
export function inputFromProto(i: contactsV1.ContactInput | undefined): ContactChange & { email: string } {
  return {
    email: i?.email ?? '',
    ...(i?.firstName !== undefined ? { firstName: i.firstName } : {}),
    ...(i?.lastName !== undefined ? { lastName: i.lastName } : {}),
    ...(i?.subscribed !== undefined ? { subscribed: i.subscribed } : {}),
    ...(i?.properties !== undefined ? { properties: i.properties.values } : {}),
  };
}
