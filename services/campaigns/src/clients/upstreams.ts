import { status } from '@grpc/grpc-js';
import { bookCursorAfter, canonicalAddress, createGrpcClient, decodeBookCursor, encodeBookCursor, isServiceError, type Logger, type ServiceMetrics } from '@mailfleet/kit';
import { contactsV1, domainsV1, emailsV1, suppressionsV1 } from '@mailfleet/proto';

/** One subscribed contact of a book, as the sender renders it. */
export interface BookContact {
  readonly id: string;
  readonly email: string;
  readonly firstName?: string | undefined;
  readonly lastName?: string | undefined;
  readonly properties: Readonly<Record<string, string>>;
  /** The book cursor right after this contact: where to go on once it is sent. */
  readonly cursor: string;
}

export interface ContactsPage {
  readonly contacts: readonly BookContact[];
  /** Cursor after the last contact of the page; undefined when the book has no more. */
  readonly nextCursor: string | undefined;
}

/** What the campaigns service needs of the other services (each call with a deadline and a breaker). */
export interface CampaignUpstreams {
  /** 'verified' | 'unverified' | 'unknown' for a domain name of the team. */
  domainState(teamId: string, domainName: string): Promise<'verified' | 'unverified' | 'unknown'>;
  bookExists(teamId: string, contactBookId: string): Promise<boolean>;
  /** Subscribed contacts of a book after `cursor`, oldest first (at most 1,000). */
  bookContacts(teamId: string, contactBookId: string, cursor: string | null, limit: number): Promise<ContactsPage>;
  /** Marks a contact unsubscribed because of a campaign link; returns its address. */
  unsubscribeContact(teamId: string, contactId: string, campaignId: string, reason: string): Promise<{ email: string }>;
  /** Hands a chunk of rendered emails to the emails service (idempotent on the key). */
  sendBatch(req: emailsV1.SendBatchRequest): Promise<emailsV1.SendBatchResponse>;
  deleteCampaignEmails(teamId: string, campaignId: string): Promise<number>;
  /** How many of these addresses (at most 1,000) are on the team's suppression list. */
  countSuppressed(teamId: string, emails: readonly string[]): Promise<number>;
  close(): void;
}

/** Addresses per CheckSuppressed call (the suppressions service's limit). */
export const CHECK_SUPPRESSED_MAX = 1000;

export function createUpstreams(opts: {
  contactsAddr: string;
  domainsAddr: string;
  emailsAddr: string;
  suppressionsAddr: string;
  deadlineMs: number;
  sendBatchDeadlineMs: number;
  logger: Logger;
  metrics?: ServiceMetrics;
}): CampaignUpstreams {
  const common = { logger: opts.logger, metrics: opts.metrics, deadlineMs: opts.deadlineMs };
  const contacts = createGrpcClient({ ...common, name: 'contacts', address: opts.contactsAddr, ctor: contactsV1.ContactsServiceClient });
  const domains = createGrpcClient({ ...common, name: 'domains', address: opts.domainsAddr, ctor: domainsV1.DomainsServiceClient });
  const emails = createGrpcClient({ ...common, name: 'emails', address: opts.emailsAddr, ctor: emailsV1.EmailsServiceClient });
  const suppressions = createGrpcClient({ ...common, name: 'suppressions', address: opts.suppressionsAddr, ctor: suppressionsV1.SuppressionsServiceClient });
  const notFound = (err: unknown) => isServiceError(err) && err.code === status.NOT_FOUND;
  return {
    async domainState(teamId, domainName) {
      try {
        const r = await domains.call.getSendingIdentity({ teamId, domainName });
        return r.status === domainsV1.DomainStatus.DOMAIN_STATUS_SUCCESS ? 'verified' : 'unverified';
      } catch (err) {
        if (notFound(err)) return 'unknown';
        if (isServiceError(err) && err.code === status.FAILED_PRECONDITION) return 'unverified';
        throw err;
      }
    },
    async bookExists(teamId, contactBookId) {
      try {
        await contacts.call.getContactBook({ teamId, contactBookId });
        return true;
      } catch (err) {
        if (notFound(err)) return false;
        throw err;
      }
    },
    async bookContacts(teamId, contactBookId, cursor, limit) {
      const r = await contacts.call.listBookContacts({ teamId, contactBookId, cursor: cursor ?? undefined, limit });
      // Each contact's cursor is in the page's own order: the order of the cursor it was asked with.
      const asked = cursor ? decodeBookCursor(cursor) : undefined;
      return {
        contacts: r.contacts.map((c) => ({
          id: c.id, email: c.email, firstName: c.firstName, lastName: c.lastName, properties: c.properties,
          cursor: encodeBookCursor(bookCursorAfter(asked, c.id, c.createdAt ?? new Date(0))),
        })),
        nextCursor: r.nextCursor,
      };
    },
    async unsubscribeContact(teamId, contactId, campaignId, reason) {
      const r = await contacts.call.unsubscribeContact({
        teamId, contactId, reason, campaignId, reasonCode: contactsV1.UnsubscribeReason.UNSUBSCRIBE_REASON_UNSUBSCRIBE, source: campaignId,
      });
      return { email: r.contact?.email ?? '' };
    },
    async sendBatch(req) {
      return emails.call.sendBatch(req, { deadlineMs: opts.sendBatchDeadlineMs });
    },
    async deleteCampaignEmails(teamId, campaignId) {
      return Number((await emails.call.deleteCampaignEmails({ teamId, campaignId })).deletedCount);
    },
    async countSuppressed(teamId, addresses) {
      // The suppressions service answers at most CHECK_SUPPRESSED_MAX addresses per call; a page of the book may hold more.
      const found = new Set<string>();
      for (let i = 0; i < addresses.length; i += CHECK_SUPPRESSED_MAX) {
        const res = await suppressions.call.checkSuppressed({ teamId, emails: addresses.slice(i, i + CHECK_SUPPRESSED_MAX) });
        for (const e of res.suppressedEmails) found.add(canonicalAddress(e));
      }
      return found.size;
    },
    close() {
      contacts.close();
      domains.close();
      emails.close();
      suppressions.close();
    },
  };
}
