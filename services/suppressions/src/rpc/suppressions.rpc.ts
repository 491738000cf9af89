import { InvalidArgumentError, NotFoundError, type UnaryHandlers } from '@mailfleet/kit';
import { suppressionsV1 } from '@mailfleet/proto';
import {
  checkPaging, checkSearch, checkSource, lookupKeys, MAX_CHECK_ADDRESSES, normalizeEmail, pickSuppressed, type Checked,
} from '../domain/suppressions.js';
import type { SuppressionsRepository } from '../repositories/suppressions.repository.js';
import { reasonFromProto, suppressionToProto } from './mapping.js';

export interface SuppressionsRpcDeps {
  readonly suppressions: SuppressionsRepository;
  readonly now?: () => Date;
}

function valid<T>(c: Checked<T>): T {
  if (!c.ok) throw new InvalidArgumentError(c.message);
  return c.value;
}

function requireTeam(teamId: string): string {
  if (!teamId) throw new InvalidArgumentError('team_id is required');
  return teamId;
}

function requireEmail(raw: string): string {
  const email = normalizeEmail(raw);
  if (!email) throw new InvalidArgumentError(raw.trim() ? `Invalid email address: ${raw.trim().slice(0, 320)}` : 'email is required');
  return email;
}

export function createSuppressionsHandlers(deps: SuppressionsRpcDeps): UnaryHandlers<suppressionsV1.SuppressionsServiceServer> {
  const now = deps.now ?? (() => new Date());
  return {
    async listSuppressions(req) {
      const teamId = requireTeam(req.teamId);
      const paging = valid(checkPaging(req.page, req.limit));
      const search = valid(checkSearch(req.search));
      const reason = req.reason === suppressionsV1.SuppressionReason.SUPPRESSION_REASON_UNSPECIFIED ? undefined : reasonFromProto(req.reason);
      if (req.reason !== suppressionsV1.SuppressionReason.SUPPRESSION_REASON_UNSPECIFIED && !reason) throw new InvalidArgumentError('Unknown reason');
      const { items, total } = await deps.suppressions.list(teamId, { reason, search, skip: paging.skip, limit: paging.limit });
      return { suppressions: items.map(suppressionToProto), total };
    },

    async addSuppression(req) {
      const teamId = requireTeam(req.teamId);
      const email = requireEmail(req.email);
      const reason = reasonFromProto(req.reason);
      if (!reason) throw new InvalidArgumentError('reason must be one of HARD_BOUNCE, COMPLAINT, MANUAL, UNSUBSCRIBE');
      const source = valid(checkSource(req.source));
      const stored = await deps.suppressions.upsert({ teamId, email, reason, source, now: now() });
      return { suppression: suppressionToProto(stored) };
    },

    async removeSuppression(req) {
      const teamId = requireTeam(req.teamId);
      const email = requireEmail(req.email);
      if (!(await deps.suppressions.remove(teamId, email))) throw new NotFoundError(`No suppression for ${email}`);
      return {};
    },

    async checkSuppressed(req) {
      const teamId = requireTeam(req.teamId);
      if (req.emails.length > MAX_CHECK_ADDRESSES) {
        throw new InvalidArgumentError(`at most ${MAX_CHECK_ADDRESSES} addresses per call (got ${req.emails.length})`);
      }
      const keys = lookupKeys(req.emails);
      const found = await deps.suppressions.findByEmails(teamId, keys);
      const byEmail = new Map(found.map((s) => [s.email, s]));
      return {
        suppressedEmails: pickSuppressed(req.emails, new Set(byEmail.keys())),
        suppressions: keys.flatMap((k) => {
          const s = byEmail.get(k);
          return s ? [suppressionToProto(s)] : [];
        }),
      };
    },
  };
}
