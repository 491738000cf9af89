import { bodyText, headerValue, parseHeaderBlock, parseMime, splitHead, walk, type HeaderField, type MimePart } from './mime.js';

/**
 * Reads the reports that come back to a bounce address: delivery status
 * notifications (RFC 3464) and abuse/feedback reports (ARF, RFC 5965). Liberal
 * in what it accepts, since every MTA writes them a little differently; anything
 * it cannot make sense of is `undefined`, never an exception.
 */

export type DeliveryAction = 'delivered' | 'failed' | 'delayed' | 'relayed' | 'expanded';

export interface DsnRecipient {
  /** Lower case; the Original-Recipient (the address the message was sent to) when given, else the Final-Recipient. */
  recipient: string;
  action: DeliveryAction;
  /** RFC 3463 enhanced status as reported, e.g. '5.1.1' (inferred from the action or the reply when absent). */
  status: string;
  /** The Diagnostic-Code without its type (`smtp;`), unfolded, e.g. `550 5.1.1 <a@b>: User unknown`. */
  diagnostic?: string;
  /** Remote-MTA without its type (`dns;`). */
  remoteMta?: string;
}

export interface DsnReport {
  kind: 'dsn';
  /** At least one. */
  recipients: DsnRecipient[];
  /** Reporting-MTA without its type (`dns;`). */
  reportingMta?: string;
  /** Message-ID of the returned message (or its returned headers), with angle brackets. */
  originalMessageId?: string;
  /** Arrival-Date as ISO 8601. */
  arrivalDate?: string;
}

export interface ArfReport {
  kind: 'arf';
  /** Lower case: abuse, fraud, virus, not-spam, auth-failure, other... */
  feedbackType: string;
  /** Lower case, without angle brackets. */
  originalRecipient?: string;
  /** Without angle brackets. */
  originalMailFrom?: string;
  /** With angle brackets. */
  originalMessageId?: string;
  userAgent?: string;
  /** Arrival-Date (or the older Received-Date) as ISO 8601. */
  arrivalDate?: string;
  sourceIp?: string;
}

export type InboundReport = DsnReport | ArfReport;

const DELIVERY_STATUS_TYPES = new Set(['message/delivery-status', 'message/global-delivery-status']);
const FEEDBACK_TYPES = new Set(['message/feedback-report']);
const RETURNED_MESSAGE_TYPES = new Set(['message/rfc822', 'message/global']);
const RETURNED_HEADERS_TYPES = new Set(['text/rfc822-headers', 'message/global-headers']);
const ACTIONS = new Set<DeliveryAction>(['delivered', 'failed', 'delayed', 'relayed', 'expanded']);
/** An RFC 3463 status code on its own (not a piece of an IP address). */
const STATUS_CODE = /(?<![\d.])([245])\.(\d{1,3})\.(\d{1,3})(?!\d)/;
/** An SMTP reply at the start of a diagnostic: `550 5.1.1 ...`, `550-5.1.1 ...`, `5.1.1 ...` or just `550 ...`. */
const SMTP_REPLY = /^\s*(?:([245])\d\d(?:[ -]|$))?\s*(?:([245])\.(\d{1,3})\.(\d{1,3})\b)?/;

export async function parseReport(raw: Buffer): Promise<InboundReport | undefined> {
  try {
    return readReport(raw);
  } catch {
    return undefined;
  }
}

function readReport(raw: Buffer): InboundReport | undefined {
  if (raw.length === 0) return undefined;
  const root = parseMime(raw);
  const parts = walk(root);
  const statusPart = parts.find((p) => DELIVERY_STATUS_TYPES.has(p.contentType));
  const feedbackPart = parts.find((p) => FEEDBACK_TYPES.has(p.contentType));
  const returned = returnedHeaders(parts) ?? [];
  const reportType = (root.params['report-type'] ?? '').toLowerCase();

  if (feedbackPart && (reportType === 'feedback-report' || !statusPart)) return readFeedback(feedbackPart, returned);
  if (statusPart) return readDeliveryStatus(statusPart, returned);
  return undefined;
}

function readDeliveryStatus(part: MimePart, returned: HeaderField[]): DsnReport | undefined {
  const groups = fieldGroups(bodyText(part));
  const report: DsnReport = { kind: 'dsn', recipients: [] };
  for (const group of groups) {
    const reportingMta = field(group, 'reporting-mta');
    if (reportingMta && report.reportingMta === undefined) report.reportingMta = stripType(reportingMta);
    const arrival = isoDate(field(group, 'arrival-date'));
    if (arrival && report.arrivalDate === undefined) report.arrivalDate = arrival;
    const recipient = readRecipient(group);
    if (recipient) report.recipients.push(recipient);
  }
  if (report.recipients.length === 0) return undefined;
  const messageId =
    normaliseMessageId(field(returned, 'message-id')) ??
    normaliseMessageId(groups.map((g) => field(g, 'x-original-message-id')).find(Boolean));
  if (messageId) report.originalMessageId = messageId;
  return report;
}

function readRecipient(group: HeaderField[]): DsnRecipient | undefined {
  const recipient = address(field(group, 'original-recipient')) ?? address(field(group, 'final-recipient'));
  if (!recipient) return undefined;
  const diagnosticField = field(group, 'diagnostic-code');
  const diagnostic = diagnosticField ? stripType(diagnosticField) : undefined;
  const statusField = field(group, 'status');
  const statusMatch = statusField ? STATUS_CODE.exec(statusField) : null;
  // Sendmail writes `Action: delivered (to mailbox)`.
  const actionWord = (field(group, 'action') ?? '').toLowerCase().match(/^[a-z]+/)?.[0];
  let action = ACTIONS.has(actionWord as DeliveryAction) ? (actionWord as DeliveryAction) : undefined;

  let status = statusMatch ? `${statusMatch[1]}.${Number(statusMatch[2])}.${Number(statusMatch[3])}` : undefined;
  if (!status && diagnostic) status = statusFromReply(diagnostic);
  if (!status && action) status = action === 'failed' ? '5.0.0' : action === 'delayed' ? '4.0.0' : '2.0.0';
  if (!status) return undefined;
  action ??= status.startsWith('5') ? 'failed' : status.startsWith('4') ? 'delayed' : 'delivered';

  const out: DsnRecipient = { recipient, action, status };
  if (diagnostic) out.diagnostic = diagnostic;
  const remoteMta = field(group, 'remote-mta');
  if (remoteMta) out.remoteMta = stripType(remoteMta);
  return out;
}

function readFeedback(part: MimePart, returned: HeaderField[]): ArfReport | undefined {
  const fields = fieldGroups(bodyText(part)).flat();
  const feedbackType = field(fields, 'feedback-type')?.toLowerCase().match(/^[a-z0-9-]+/)?.[0];
  if (!feedbackType) return undefined;
  const report: ArfReport = { kind: 'arf', feedbackType };
  // Microsoft's JMRP leaves Original-Rcpt-To out and names the recipient in the returned message instead.
  const recipient = address(field(fields, 'original-rcpt-to')) ?? address(field(returned, 'x-hmxmroriginalrecipient'));
  if (recipient) report.originalRecipient = recipient;
  const mailFrom = field(fields, 'original-mail-from');
  if (mailFrom !== undefined) {
    const from = stripAngles(mailFrom);
    if (from) report.originalMailFrom = from;
  }
  const messageId = normaliseMessageId(field(returned, 'message-id'));
  if (messageId) report.originalMessageId = messageId;
  const userAgent = field(fields, 'user-agent');
  if (userAgent) report.userAgent = userAgent;
  const arrival = isoDate(field(fields, 'arrival-date') ?? field(fields, 'received-date'));
  if (arrival) report.arrivalDate = arrival;
  const sourceIp = field(fields, 'source-ip');
  if (sourceIp) report.sourceIp = sourceIp.replace(/^\[|\]$/g, '');
  return report;
}

/**
 * A message/delivery-status body: header blocks separated by empty lines. An
 * MTA that forgets the empty line between two recipients still gets two groups:
 * a second Final-Recipient (or Action) starts a new one.
 */
function fieldGroups(text: string): HeaderField[][] {
  const groups: HeaderField[][] = [];
  for (const block of text.split(/\r?\n(?:[ \t]*\r?\n)+/)) {
    let current: HeaderField[] = [];
    for (const f of parseHeaderBlock(block)) {
      const starts = f.name === 'final-recipient' || f.name === 'action';
      if (starts && current.some((c) => c.name === f.name)) {
        groups.push(current);
        current = [];
      }
      current.push(f);
    }
    if (current.length > 0) groups.push(current);
  }
  return groups;
}

/** Header fields of the returned message (message/rfc822) or returned headers (text/rfc822-headers), if any. */
function returnedHeaders(parts: MimePart[]): HeaderField[] | undefined {
  for (const part of parts) {
    let head: string | undefined;
    if (RETURNED_MESSAGE_TYPES.has(part.contentType)) head = splitHead(bodyText(part)).head;
    else if (RETURNED_HEADERS_TYPES.has(part.contentType)) head = bodyText(part);
    if (head === undefined) continue;
    const headers = parseHeaderBlock(head);
    if (headers.length > 0) return headers;
  }
  return undefined;
}

function field(fields: readonly HeaderField[], name: string): string | undefined {
  const value = headerValue(fields, name);
  return value === undefined || value === '' ? undefined : value;
}

/** `rfc822; <A@B>` -> `a@b`; `utf-8; user\x{E9}@b` decoded (RFC 6533); a missing type is tolerated. */
function address(value: string | undefined): string | undefined {
  if (!value) return undefined;
  const semi = value.indexOf(';');
  const type = semi >= 0 ? value.slice(0, semi).trim().toLowerCase() : 'rfc822';
  if (type !== 'rfc822' && type !== 'utf-8') return undefined;
  let addr = semi >= 0 ? value.slice(semi + 1) : value;
  addr = addr.replace(/\([^()]*\)/g, ' ').trim();
  if (type === 'utf-8') addr = addr.replace(/\\x\{([0-9A-Fa-f]{1,6})\}/g, (_m, hex: string) => String.fromCodePoint(parseInt(hex, 16)));
  const angled = /<([^<>]*)>/.exec(addr);
  if (angled) addr = angled[1] as string;
  addr = addr.trim().replace(/^"(.*)"$/, '$1');
  if (!/^[^\s@]+@[^\s@]+$/.test(addr)) return undefined;
  return addr.toLowerCase();
}

/** `dns; mx.example.org` -> `mx.example.org`; `smtp; 550 ...` -> `550 ...`. */
function stripType(value: string): string {
  return value.replace(/^[A-Za-z][A-Za-z0-9.+-]*\s*;\s*/, '').replace(/\s+/g, ' ').trim();
}

function stripAngles(value: string): string {
  const angled = /<([^<>]*)>/.exec(value);
  return (angled ? (angled[1] as string) : value).trim();
}

function normaliseMessageId(value: string | undefined): string | undefined {
  if (!value) return undefined;
  const angled = /<[^<>\s]+>/.exec(value);
  if (angled) return angled[0];
  const bare = value.trim().split(/\s+/)[0];
  return bare ? `<${bare}>` : undefined;
}

function isoDate(value: string | undefined): string | undefined {
  if (!value) return undefined;
  // Date.parse rejects RFC 5322 comments such as `(UTC)` after the zone.
  const time = Date.parse(value.replace(/\([^()]*\)/g, ' ').trim());
  return Number.isNaN(time) ? undefined : new Date(time).toISOString();
}

/** The enhanced status code of an SMTP reply text, or its class from the reply code. */
function statusFromReply(text: string): string | undefined {
  const m = SMTP_REPLY.exec(text);
  if (!m) return undefined;
  if (m[2]) return `${m[2]}.${Number(m[3])}.${Number(m[4])}`;
  if (m[1]) return `${m[1]}.0.0`;
  return undefined;
}

/**
 * SES-style classification of a failed or delayed recipient: Permanent (hard)
 * for 5.x.x, Transient (soft) for 4.x.x. The subtype comes from the status
 * detail; a generic status (`5.0.0`, as Exim writes) is refined by the
 * enhanced code in the remote server's reply when it has the same class.
 */
export function classifyBounce(r: DsnRecipient): { type: 'Permanent' | 'Transient'; subType: string; message: string } {
  const statusClass = r.status.charAt(0);
  const type: 'Permanent' | 'Transient' =
    statusClass === '5' || (statusClass !== '4' && r.action === 'failed') ? 'Permanent' : 'Transient';
  let detail = r.status.split('.').slice(1).join('.');
  if (detail === '0.0' && r.diagnostic) {
    const fromReply = statusFromReply(r.diagnostic);
    if (fromReply && fromReply.charAt(0) === statusClass) detail = fromReply.split('.').slice(1).join('.');
  }
  return { type, subType: subTypeOf(type, detail, r.diagnostic ?? ''), message: r.diagnostic ?? `${r.status} ${describeStatus(r.status)}`.trim() };
}

function subTypeOf(type: 'Permanent' | 'Transient', detail: string, diagnostic: string): string {
  switch (detail) {
    case '1.1':
    case '1.6':
    case '1.10':
      return 'NoEmail';
    case '2.2':
      return 'MailboxFull';
    case '2.3':
    case '3.4':
      return 'MessageTooLarge';
  }
  if (detail.startsWith('7.')) {
    if (/attachment/i.test(diagnostic)) return 'AttachmentRejected';
    if (/\b(content|virus|malware|phish\w*|spam|spammy|junk)\b/i.test(diagnostic)) return 'ContentRejected';
    // A policy refusal of the sender or the recipient; for now (4.7.x: greylisting, rate limits) it is only a delay.
    return type === 'Permanent' ? 'Suppressed' : 'General';
  }
  return 'General';
}

const STATUS_TEXT: Record<string, string> = {
  '0.0': 'Other undefined status',
  '1.1': 'Bad destination mailbox address',
  '1.2': 'Bad destination system address',
  '1.3': 'Bad destination mailbox address syntax',
  '1.6': 'Destination mailbox has moved, no forwarding address',
  '1.10': 'Recipient address has null MX',
  '2.0': 'Other or undefined mailbox status',
  '2.1': 'Mailbox disabled, not accepting messages',
  '2.2': 'Mailbox full',
  '2.3': 'Message length exceeds administrative limit',
  '3.4': 'Message too big for system',
  '4.1': 'No answer from host',
  '4.4': 'Unable to route',
  '4.7': 'Delivery time expired',
  '7.1': 'Delivery not authorized, message refused',
};

function describeStatus(status: string): string {
  const detail = status.split('.').slice(1).join('.');
  return STATUS_TEXT[detail] ?? (status.startsWith('2') ? 'Delivered' : '');
}
