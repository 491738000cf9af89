import { AddressError, parseMailboxes, parseSingleMailbox, uniqueAddresses, type Mailbox } from './addresses.js';
import { headersProblem } from './headers.js';

/** What a send request carries (the proto's OutgoingEmail, without its wire types). */
export interface EmailInput {
  readonly to: readonly string[];
  readonly from: string;
  readonly subject?: string | undefined;
  readonly html?: string | undefined;
  readonly text?: string | undefined;
  readonly templateId?: string | undefined;
  readonly variables?: Readonly<Record<string, unknown>> | undefined;
  readonly replyTo: readonly string[];
  readonly cc: readonly string[];
  readonly bcc: readonly string[];
  readonly headers: Readonly<Record<string, string>>;
  readonly attachments: readonly { readonly filename: string; readonly content: Buffer }[];
  readonly scheduledAt?: Date | undefined;
  readonly inReplyToId?: string | undefined;
  readonly campaignId?: string | undefined;
  readonly contactId?: string | undefined;
  readonly metadata?: Readonly<Record<string, unknown>> | undefined;
}

export interface ValidatedEmail {
  readonly from: Mailbox;
  readonly to: readonly Mailbox[];
  readonly cc: readonly Mailbox[];
  readonly bcc: readonly Mailbox[];
  readonly replyTo: readonly Mailbox[];
  /** Envelope recipients: distinct lower-cased addresses of to, cc and bcc. */
  readonly recipients: readonly string[];
  readonly subject?: string | undefined;
  readonly html?: string | undefined;
  readonly text?: string | undefined;
  readonly templateId?: string | undefined;
  readonly variables?: Readonly<Record<string, unknown>> | undefined;
  readonly headers: Readonly<Record<string, string>>;
  readonly attachments: readonly { readonly filename: string; readonly content: Buffer }[];
  readonly scheduledAt?: Date | undefined;
  readonly inReplyToId?: string | undefined;
  readonly campaignId?: string | undefined;
  readonly contactId?: string | undefined;
  readonly metadata?: Readonly<Record<string, unknown>> | undefined;
}

export interface ValidationLimits {
  readonly maxAttachmentsBytes: number;
  readonly now: Date;
}

export const MAX_RECIPIENTS = 50;
export const MAX_ATTACHMENTS = 10;
export const MAX_BATCH = 100;
export const MAX_SUBJECT_LENGTH = 998;
export const MAX_BODY_LENGTH = 5 * 1024 * 1024;
/** Furthest a send may be scheduled ahead. */
export const MAX_SCHEDULE_AHEAD_MS = 365 * 24 * 3_600_000;

/** A request problem; `field` is the public field name (the batch adds the item index in front). */
export class ValidationProblem extends Error {
  constructor(public readonly field: string, message: string) {
    super(message);
    this.name = 'ValidationProblem';
  }
}

// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const FILENAME_BAD = /[\u0000-\u001f\u007f/\\]/;

function mailboxes(field: string, values: readonly string[]): Mailbox[] {
  const out: Mailbox[] = [];
  for (const v of values) {
    try {
      out.push(...parseMailboxes(v));
    } catch (err) {
      if (err instanceof AddressError) throw new ValidationProblem(field, `${field}: ${err.message}`);
      throw err;
    }
  }
  return out;
}

/**
 * Everything about one email that can be checked without asking anyone:
 * addresses, required fields, headers, attachments, schedule. Throws the
 * first problem as a ValidationProblem.
 */
export function validateEmail(input: EmailInput, limits: ValidationLimits): ValidatedEmail {
  if (input.to.length === 0) throw new ValidationProblem('to', 'to is required: at least one recipient');
  const to = mailboxes('to', input.to);
  const cc = mailboxes('cc', input.cc);
  const bcc = mailboxes('bcc', input.bcc);
  const replyTo = mailboxes('replyTo', input.replyTo);
  const recipients = uniqueAddresses([...to, ...cc, ...bcc]);
  if (recipients.length > MAX_RECIPIENTS) throw new ValidationProblem('to', `at most ${MAX_RECIPIENTS} recipients (to, cc and bcc together)`);

  if (!input.from) throw new ValidationProblem('from', 'from is required');
  let from: Mailbox;
  try {
    from = parseSingleMailbox(input.from);
  } catch (err) {
    if (err instanceof AddressError) throw new ValidationProblem('from', `from: ${err.message}`);
    throw err;
  }

  const templateId = input.templateId?.trim() || undefined;
  if (input.subject !== undefined && input.subject.trim() === '' && !templateId) throw new ValidationProblem('subject', 'subject must not be empty');
  if (input.subject === undefined && !templateId) throw new ValidationProblem('subject', 'subject or templateId is required');
  if (input.subject !== undefined && input.subject.length > MAX_SUBJECT_LENGTH) throw new ValidationProblem('subject', `subject is longer than ${MAX_SUBJECT_LENGTH} characters`);
  if (input.html === undefined && input.text === undefined && !templateId) throw new ValidationProblem('html', 'one of text, html or templateId is required');
  for (const [field, body] of [['html', input.html], ['text', input.text]] as const) {
    if (body !== undefined && body.length > MAX_BODY_LENGTH) throw new ValidationProblem(field, `${field} is larger than ${MAX_BODY_LENGTH} characters`);
  }

  const headerIssue = headersProblem(input.headers);
  if (headerIssue) throw new ValidationProblem('headers', headerIssue);

  if (input.attachments.length > MAX_ATTACHMENTS) throw new ValidationProblem('attachments', `at most ${MAX_ATTACHMENTS} attachments`);
  let total = 0;
  input.attachments.forEach((a, i) => {
    const name = a.filename.trim();
    if (name === '') throw new ValidationProblem(`attachments[${i}].filename`, `attachments[${i}].filename is required`);
    if (name.length > 255 || FILENAME_BAD.test(name)) {
      throw new ValidationProblem(`attachments[${i}].filename`, `attachments[${i}].filename must be a plain file name (no path, no control characters, at most 255 characters)`);
    }
    total += a.content.length;
  });
  if (total > limits.maxAttachmentsBytes) {
    throw new ValidationProblem('attachments', `attachments total ${total} bytes; the limit is ${limits.maxAttachmentsBytes} bytes`);
  }

  if (input.scheduledAt) {
    if (Number.isNaN(input.scheduledAt.getTime())) throw new ValidationProblem('scheduledAt', 'scheduledAt is not a valid date');
    if (input.scheduledAt.getTime() - limits.now.getTime() > MAX_SCHEDULE_AHEAD_MS) {
      throw new ValidationProblem('scheduledAt', 'scheduledAt may be at most 365 days ahead');
    }
  }

  return {
    from, to, cc, bcc, replyTo, recipients,
    subject: input.subject,
    html: input.html,
    text: input.text,
    templateId,
    variables: input.variables,
    headers: input.headers,
    attachments: input.attachments.map((a) => ({ filename: a.filename.trim(), content: a.content })),
    scheduledAt: input.scheduledAt,
    inReplyToId: input.inReplyToId?.trim() || undefined,
    campaignId: input.campaignId || undefined,
    contactId: input.contactId || undefined,
    metadata: input.metadata,
  };
}
