import type { EmailStatus } from './status.js';

/** What an `email.*` payload is built from. */
export interface EmailFacts {
  readonly id: string;
  readonly from: string;
  /** Bare addresses of the `to` field. */
  readonly toAddresses: readonly string[];
  readonly subject: string;
  readonly domainId?: string | undefined;
  readonly campaignId?: string | undefined;
  readonly contactId?: string | undefined;
  readonly templateId?: string | undefined;
  readonly metadata?: Readonly<Record<string, unknown>> | undefined;
}

export interface BounceDetails {
  readonly type: 'Permanent' | 'Transient' | 'Undetermined';
  readonly subType: string;
  readonly message: string;
}

export interface TrackingDetails {
  readonly timestamp: string;
  readonly userAgent: string;
  readonly ip: string;
  readonly platform: string;
}

/** Details an event adds to the common payload. */
export interface EventExtras {
  /** Recipients the event is about (a bounce names only the bounced ones); default the email's `to`. */
  readonly to?: readonly string[] | undefined;
  readonly bounce?: BounceDetails | undefined;
  readonly open?: TrackingDetails | undefined;
  readonly click?: (TrackingDetails & { readonly url: string }) | undefined;
  /** Anything else worth keeping with the stored event (relay response, error, attempt...). */
  readonly details?: Readonly<Record<string, unknown>> | undefined;
}

/**
 * The SPEC 6.3 payload: `{id, status, from, to, occurredAt, subject}` plus
 * campaignId, contactId, domainId, templateId and metadata when known, plus
 * bounce/open/click for those events. Every field present (proto3 JSON would
 * drop defaults; consumers get the full public shape).
 */
export function emailEventData(email: EmailFacts, status: EmailStatus, occurredAt: Date, extras: EventExtras = {}): Record<string, unknown> {
  const data: Record<string, unknown> = {
    id: email.id,
    status,
    from: email.from,
    to: [...(extras.to ?? email.toAddresses)],
    occurredAt: occurredAt.toISOString(),
    subject: email.subject,
  };
  if (email.campaignId) data.campaignId = email.campaignId;
  if (email.contactId) data.contactId = email.contactId;
  if (email.domainId) data.domainId = email.domainId;
  if (email.templateId) data.templateId = email.templateId;
  if (email.metadata && Object.keys(email.metadata).length > 0) data.metadata = email.metadata;
  if (extras.bounce) data.bounce = { ...extras.bounce };
  if (extras.open) data.open = { ...extras.open };
  if (extras.click) data.click = { ...extras.click };
  if (extras.details) Object.assign(data, extras.details);
  return data;
}
