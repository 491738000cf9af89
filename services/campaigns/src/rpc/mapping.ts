import { campaignsV1 } from '@mailfleet/proto';
import type { Campaign, CampaignStatus } from '../domain/campaign.js';

const STATUSES: Record<CampaignStatus, campaignsV1.CampaignStatus> = {
  DRAFT: campaignsV1.CampaignStatus.CAMPAIGN_STATUS_DRAFT,
  SCHEDULED: campaignsV1.CampaignStatus.CAMPAIGN_STATUS_SCHEDULED,
  SENDING: campaignsV1.CampaignStatus.CAMPAIGN_STATUS_SENDING,
  PAUSED: campaignsV1.CampaignStatus.CAMPAIGN_STATUS_PAUSED,
  COMPLETED: campaignsV1.CampaignStatus.CAMPAIGN_STATUS_COMPLETED,
};

export function statusToProto(s: CampaignStatus): campaignsV1.CampaignStatus {
  return STATUSES[s];
}

export function campaignToProto(c: Campaign): campaignsV1.Campaign {
  return {
    id: c.id, teamId: c.teamId, name: c.name, from: c.from, subject: c.subject,
    previewText: c.previewText ?? undefined, contactBookId: c.contactBookId ?? undefined, html: c.html ?? undefined, content: c.content ?? undefined,
    status: statusToProto(c.status), scheduledAt: c.scheduledAt ?? undefined, batchSize: c.batchSize, batchWindowMinutes: c.batchWindowMinutes,
    total: c.total, sent: c.sent, delivered: c.delivered, opened: c.opened, clicked: c.clicked, unsubscribed: c.unsubscribed,
    bounced: c.bounced, hardBounced: c.hardBounced, complained: c.complained,
    replyTo: [...c.replyTo], cc: [...c.cc], bcc: [...c.bcc], createdAt: c.createdAt, updatedAt: c.updatedAt,
    pausedReason: c.pausedReason ?? undefined,
  };
}

export function listItemToProto(c: Campaign): campaignsV1.CampaignListItem {
  return {
    id: c.id, name: c.name, subject: c.subject, status: statusToProto(c.status), createdAt: c.createdAt,
    sent: c.sent, delivered: c.delivered, opened: c.opened, clicked: c.clicked,
  };
}
