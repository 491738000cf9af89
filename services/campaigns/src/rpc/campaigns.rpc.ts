import {
  FailedPreconditionError, InvalidArgumentError, newId, NotFoundError, type UnaryHandlers,
} from '@mailfleet/kit';
import type { campaignsV1 } from '@mailfleet/proto';
import type { CampaignUpstreams } from '../clients/upstreams.js';
import {
  checkBatching, checkCampaignInput, DEFAULT_BATCH_SIZE, DEFAULT_BATCH_WINDOW_MINUTES, PAUSABLE, RESUMABLE, resumedStatus, SCHEDULABLE, senderDomain,
  type Campaign, type CampaignStatus,
} from '../domain/campaign.js';
import { resolveSchedule } from '../domain/schedule.js';
import { verifyUnsubscribeToken } from '../domain/unsubscribe-token.js';
import type { CampaignsRepository } from '../repositories/campaigns.repository.js';
import { campaignToProto, listItemToProto } from './mapping.js';

/** Unsubscribe keys are kept a year: a link clicked again later must not count twice. */
const UNSUBSCRIBE_KEY_RETENTION_MS = 366 * 24 * 3600_000;
const DEFAULT_UNSUBSCRIBE_REASON = 'Unsubscribed from a campaign';

export interface CampaignsHandlerDeps {
  readonly campaigns: CampaignsRepository;
  readonly upstreams: Omit<CampaignUpstreams, 'close'>;
  readonly timeZone: string;
  readonly signingKey: string;
  /** A campaign became due now (sendNow, resume): run the sender soon. */
  readonly kickSender?: () => void;
  readonly now?: () => Date;
}

function schedule(input: string, now: Date, timeZone: string): Date {
  const r = resolveSchedule(input, now, timeZone);
  if (!r.ok) throw new InvalidArgumentError(r.message);
  return r.at;
}

export function createCampaignsHandlers(deps: CampaignsHandlerDeps): UnaryHandlers<campaignsV1.CampaignsServiceServer> {
  const { campaigns } = deps;
  const now = deps.now ?? (() => new Date());

  async function mustGet(teamId: string, id: string): Promise<Campaign> {
    const c = await campaigns.get(teamId, id);
    if (!c) throw new NotFoundError(`Campaign ${id} not found`);
    return c;
  }

  /**
   * Before a campaign (re)starts towards sending (schedule, resume): what the sender would be refused
   * for every chunk is refused now, naming the field, instead of the campaign pausing later.
   */
  async function mustBeSendable(c: Campaign): Promise<void> {
    const domain = senderDomain(c.from);
    const state = domain ? await deps.upstreams.domainState(c.teamId, domain) : 'unknown';
    if (state !== 'verified') {
      throw new FailedPreconditionError(`from: the domain ${domain ?? c.from} is no longer a verified domain of this team; verify it first`);
    }
    if (!c.contactBookId || !(await deps.upstreams.bookExists(c.teamId, c.contactBookId))) {
      throw new FailedPreconditionError(`contactBookId: the contact book ${c.contactBookId ?? ''} no longer exists`);
    }
  }

  /** Runs a compare-and-set transition; explains a refusal (missing: 404, wrong status: 400 precondition). */
  async function transition(
    teamId: string, id: string, from: readonly CampaignStatus[], action: string,
    set: Parameters<CampaignsRepository['transition']>[3], ifScheduledAt?: Date | null,
  ): Promise<Campaign> {
    const updated = await campaigns.transition(teamId, id, from, set, now(), ifScheduledAt);
    if (updated) return updated;
    const current = await mustGet(teamId, id);
    throw new FailedPreconditionError(`Cannot ${action} a campaign that is ${current.status}`);
  }

  return {
    async createCampaign(req) {
      const problem = checkCampaignInput(req);
      if (problem) throw new InvalidArgumentError(problem.message);
      const t = now();
      const scheduledAt = req.scheduledAt !== undefined && !req.sendNow ? schedule(req.scheduledAt, t, deps.timeZone) : null;
      const domain = senderDomain(req.from);
      if (!domain) throw new InvalidArgumentError(`from: "${req.from}" is not an email address`);
      const state = await deps.upstreams.domainState(req.teamId, domain);
      if (state !== 'verified') throw new InvalidArgumentError(`from: the domain ${domain} is not a verified domain of this team`);
      if (!(await deps.upstreams.bookExists(req.teamId, req.contactBookId))) throw new NotFoundError(`Contact book ${req.contactBookId} not found`);
      const status: CampaignStatus = req.sendNow ? 'SENDING' : scheduledAt ? 'SCHEDULED' : 'DRAFT';
      const c = await campaigns.insert({
        id: newId('cmp'), teamId: req.teamId, name: req.name.trim(), from: req.from.trim(), subject: req.subject,
        previewText: req.previewText ?? null, contactBookId: req.contactBookId, html: req.html || null, content: req.content || null,
        status, scheduledAt: req.sendNow ? t : scheduledAt, batchSize: req.batchSize ?? DEFAULT_BATCH_SIZE,
        batchWindowMinutes: req.batchWindowMinutes ?? DEFAULT_BATCH_WINDOW_MINUTES,
        replyTo: req.replyTo, cc: req.cc, bcc: req.bcc, createdAt: t, updatedAt: t, nextBatchAt: t,
      });
      if (status === 'SENDING') deps.kickSender?.();
      return { campaign: campaignToProto(c) };
    },

    async listCampaigns(req) {
      return { campaigns: (await campaigns.list(req.teamId)).map(listItemToProto) };
    },

    async getCampaign(req) {
      return { campaign: campaignToProto(await mustGet(req.teamId, req.campaignId)) };
    },

    async scheduleCampaign(req) {
      const problem = checkBatching(req.batchSize, req.batchWindowMinutes);
      if (problem) throw new InvalidArgumentError(problem.message);
      const t = now();
      const at = req.scheduledAt !== undefined && req.scheduledAt.trim() !== '' ? schedule(req.scheduledAt, t, deps.timeZone) : t;
      const current = await mustGet(req.teamId, req.campaignId);
      if (SCHEDULABLE.includes(current.status)) await mustBeSendable(current);
      const c = await transition(req.teamId, req.campaignId, SCHEDULABLE, 'schedule', {
        status: 'SCHEDULED', scheduledAt: at,
        ...(req.batchSize !== undefined ? { batchSize: req.batchSize } : {}),
        ...(req.batchWindowMinutes !== undefined ? { batchWindowMinutes: req.batchWindowMinutes } : {}),
      });
      if (at.getTime() <= t.getTime()) deps.kickSender?.();
      return { campaign: campaignToProto(c) };
    },

    async pauseCampaign(req) {
      return { campaign: campaignToProto(await transition(req.teamId, req.campaignId, PAUSABLE, 'pause', { status: 'PAUSED' })) };
    },

    async resumeCampaign(req) {
      const current = await mustGet(req.teamId, req.campaignId);
      if (!RESUMABLE.includes(current.status)) throw new FailedPreconditionError(`Cannot resume a campaign that is ${current.status}`);
      await mustBeSendable(current);
      // A campaign paused while it waited for its time waits for it again; the compare-and-set on
      // scheduledAt makes a reschedule in between refuse this resume rather than use a stale time.
      const status = resumedStatus(current.scheduledAt, now());
      const c = await transition(req.teamId, req.campaignId, RESUMABLE, 'resume', { status }, current.scheduledAt);
      if (status === 'SENDING') deps.kickSender?.();
      return { campaign: campaignToProto(c) };
    },

    async deleteCampaign(req) {
      await mustGet(req.teamId, req.campaignId);
      // Emails first: if that fails the campaign is still there and the delete can be retried.
      await deps.upstreams.deleteCampaignEmails(req.teamId, req.campaignId);
      if (!(await campaigns.delete(req.teamId, req.campaignId))) throw new NotFoundError(`Campaign ${req.campaignId} not found`);
      return {};
    },

    async listCampaignsForBook(req) {
      const list = await campaigns.listForBook(req.teamId, req.contactBookId);
      return { campaigns: list.map((c) => ({ id: c.id, name: c.name, createdAt: c.createdAt })) };
    },

    async unsubscribeFromCampaign(req) {
      const target = verifyUnsubscribeToken(deps.signingKey, req.token);
      if (!target) throw new NotFoundError('This unsubscribe link is not valid');
      const campaign = await campaigns.get(target.teamId, target.campaignId);
      const { email } = await deps.upstreams.unsubscribeContact(target.teamId, target.contactId, target.campaignId, req.reason ?? DEFAULT_UNSUBSCRIBE_REASON);
      if (campaign) {
        // Once per contact and campaign, however often the link is followed (a fresh id per request: a
        // concurrent second click counts nothing, and a request that died half way is finished by the next).
        await campaigns.countOnce({
          id: target.campaignId, key: `unsub:${target.campaignId}:${target.contactId}`, eventId: newId('unsub'), counters: ['unsubscribed'],
          now: now(), retentionMs: UNSUBSCRIBE_KEY_RETENTION_MS,
        });
      }
      return { teamId: target.teamId, campaignId: target.campaignId, contactId: target.contactId, email };
    },
  };
}
