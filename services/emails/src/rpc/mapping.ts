import { emailsV1 } from '@mailfleet/proto';
import { isEmailStatus, type EmailStatus } from '../domain/status.js';
import type { EmailInput } from '../domain/validate.js';
import type { EmailRecord, FeedbackItem, StoredEvent } from '../repositories/emails.repository.js';
import type { TemplateRecord } from '../repositories/templates.repository.js';

export function statusToProto(s: EmailStatus): emailsV1.EmailStatus {
  return emailsV1.EmailStatus[`EMAIL_STATUS_${s}`];
}

export function statusFromProto(s: emailsV1.EmailStatus): EmailStatus | undefined {
  const name = emailsV1.EmailStatus[s];
  if (typeof name !== 'string') return undefined;
  const bare = name.replace(/^EMAIL_STATUS_/, '');
  return isEmailStatus(bare) ? bare : undefined;
}

export function inputFromProto(e: emailsV1.OutgoingEmail): EmailInput {
  return {
    to: e.to,
    from: e.from,
    subject: e.subject,
    html: e.html,
    text: e.text,
    templateId: e.templateId,
    variables: e.variables,
    replyTo: e.replyTo,
    cc: e.cc,
    bcc: e.bcc,
    headers: e.headers ?? {},
    attachments: e.attachments.map((a) => ({ filename: a.filename, content: Buffer.from(a.content) })),
    scheduledAt: e.scheduledAt,
    inReplyToId: e.inReplyToId,
    campaignId: e.campaignId,
    contactId: e.contactId,
    metadata: e.metadata,
  };
}

export function emailToProto(e: EmailRecord): emailsV1.Email {
  return {
    id: e.id, teamId: e.teamId, to: [...e.to], from: e.from, subject: e.subject, html: e.content?.html, text: e.content?.text,
    latestStatus: statusToProto(e.latestStatus), scheduledAt: e.scheduledAt, domainId: e.domainId,
    createdAt: e.createdAt, updatedAt: e.updatedAt, replyTo: [...e.replyTo], cc: [...e.cc], bcc: [...e.bcc],
    campaignId: e.campaignId, contactId: e.contactId, templateId: e.templateId,
  };
}

export function eventToProto(e: EmailRecord, ev: StoredEvent): emailsV1.EmailEvent {
  return { id: ev.id, emailId: e.id, status: statusToProto(ev.status), data: ev.data, teamId: e.teamId, createdAt: ev.createdAt };
}

export function feedbackToProto(f: FeedbackItem): emailsV1.FeedbackItem {
  return { emailId: f.emailId, email: f.email, subject: f.subject, status: statusToProto(f.status), createdAt: f.createdAt };
}

export function templateToProto(t: TemplateRecord): emailsV1.Template {
  return { id: t.id, name: t.name, subject: t.subject, html: t.html, content: t.content, teamId: t.teamId, createdAt: t.createdAt, updatedAt: t.updatedAt };
}
