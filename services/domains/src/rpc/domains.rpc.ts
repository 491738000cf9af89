import {
  AlreadyExistsError, FailedPreconditionError, InternalError, InvalidArgumentError, NotFoundError, newId, type Logger, type UnaryHandlers,
} from '@mailfleet/kit';
import type { domainsV1 } from '@mailfleet/proto';
import { generateDkimKeyPair, KeyUnsealError, type DkimKeyPair, type KeySealer } from '../domain/dkim-keys.js';
import { domainOfAddress, parseDomainName, requireRegion } from '../domain/names.js';
import { buildRecords, mailFromHost, newSelector, newVerificationToken, type RecordKind, type RecordSettings } from '../domain/records.js';
import type { DomainPatch, DomainRecord, DomainsRepository } from '../repositories/domains.repository.js';
import type { RecordPublisher } from '../clients/local-dns.client.js';
import { domainToProto, statusToProto } from './mapping.js';

export interface DomainsRpcDeps {
  readonly repo: DomainsRepository;
  readonly sealer: KeySealer;
  readonly records: RecordSettings;
  readonly selectorPrefix: string;
  /** Local mode: publishes records where verification finds them; otherwise does nothing. */
  readonly publisher?: RecordPublisher;
  /** Wakes the verification worker (a PUT verify is checked at once, not at the next poll). */
  readonly kickWorker: () => void;
  /** Asks the outbox relay for a pass now. */
  readonly kickRelay: () => void;
  readonly logger: Logger;
  readonly generateKeyPair?: () => Promise<DkimKeyPair>;
  readonly now?: () => Date;
}

function requireId(value: string, field: string): string {
  if (!value) throw new InvalidArgumentError(`${field} is required`);
  return value;
}

const ALL_KINDS: readonly RecordKind[] = ['verification', 'spf', 'dkim', 'mx', 'dmarc'];

/** What PUT verify changes: a new run checked at once; a verified domain keeps sending while it is re-checked. */
export function verificationStartPatch(current: DomainRecord, now: Date): DomainPatch {
  const schedule = { nextCheckAt: now, attempt: 0, tempFailures: 0, tempSince: null, newRun: true };
  if (current.status === 'SUCCESS') return { isVerifying: true, schedule };
  return {
    status: 'PENDING',
    isVerifying: true,
    dkimStatus: 'Pending',
    spfDetails: 'Pending',
    errorMessage: null,
    verificationError: null,
    recordStatuses: Object.fromEntries(ALL_KINDS.map((k) => [k, 'PENDING'])),
    schedule,
  };
}

export function createDomainsHandlers(deps: DomainsRpcDeps): UnaryHandlers<domainsV1.DomainsServiceServer> {
  const now = deps.now ?? (() => new Date());
  const generate = deps.generateKeyPair ?? generateDkimKeyPair;
  const publisher = deps.publisher;

  async function domain(teamId: string, domainId: string): Promise<DomainRecord> {
    const d = await deps.repo.get(requireId(teamId, 'team_id'), requireId(domainId, 'domain_id'));
    if (!d) throw new NotFoundError('Domain not found');
    return d;
  }

  return {
    async createDomain(req) {
      const teamId = requireId(req.teamId, 'team_id');
      const { name, subdomain } = parseDomainName(req.name);
      const region = requireRegion(req.region);
      // Cheap early answer before generating a key; the unique index settles races.
      if (await deps.repo.findForSending(teamId, name)) throw new AlreadyExistsError(`Domain ${name} already exists in this team`);
      const keys = await generate();
      const id = newId('dom');
      const selector = newSelector(deps.selectorPrefix);
      const verificationToken = newVerificationToken();
      const record = await deps.repo.create({
        id, teamId, name, region, subdomain,
        publicKey: keys.publicKey,
        dkimSelector: selector,
        sealedKey: deps.sealer.seal(keys.privateKeyPem, id),
        verificationToken,
        mailFromHost: mailFromHost(name, deps.records),
        records: buildRecords(name, { verificationToken, selector, publicKey: keys.publicKey }, deps.records),
      }, now());
      deps.kickRelay();
      await publisher?.publish(record.id, record.records);
      return { domain: domainToProto(record) };
    },

    async listDomains(req) {
      const domains = await deps.repo.list(requireId(req.teamId, 'team_id'), req.domainId || undefined);
      return { domains: domains.map(domainToProto) };
    },

    async getDomain(req) {
      return { domain: domainToProto(await domain(req.teamId, req.domainId)) };
    },

    async verifyDomain(req) {
      const at = now();
      const res = await deps.repo.change(requireId(req.teamId, 'team_id'), requireId(req.domainId, 'domain_id'), (cur) => verificationStartPatch(cur, at), at);
      if (!res) throw new NotFoundError('Domain not found');
      // Again on every verify: repairs a publish lost to a crash right after the domain was created.
      await publisher?.publish(res.after.id, res.after.records);
      deps.kickWorker();
      deps.kickRelay();
      return { message: `Verification of ${res.after.name} started` };
    },

    async deleteDomain(req) {
      const deleted = await deps.repo.delete(requireId(req.teamId, 'team_id'), requireId(req.domainId, 'domain_id'), now());
      if (!deleted) throw new NotFoundError('Domain not found');
      // Publish domain.deleted at once: emails scheduled from the domain must fail, not go out.
      deps.kickRelay();
      await publisher?.remove(deleted.id);
      return { message: `Domain ${deleted.name} deleted` };
    },

    async updateDomain(req) {
      if (req.clickTracking === undefined && req.openTracking === undefined) {
        throw new InvalidArgumentError('Nothing to update: give openTracking and/or clickTracking');
      }
      const res = await deps.repo.change(requireId(req.teamId, 'team_id'), requireId(req.domainId, 'domain_id'), (cur) => {
        const patch: DomainPatch = {};
        if (req.clickTracking !== undefined && req.clickTracking !== cur.clickTracking) patch.clickTracking = req.clickTracking;
        if (req.openTracking !== undefined && req.openTracking !== cur.openTracking) patch.openTracking = req.openTracking;
        return Object.keys(patch).length > 0 ? patch : null;
      }, now());
      if (!res) throw new NotFoundError('Domain not found');
      if (res.after !== res.before) deps.kickRelay();
      return { domain: domainToProto(res.after) };
    },

    async getSendingIdentity(req) {
      const teamId = requireId(req.teamId, 'team_id');
      const name = domainOfAddress(req.domainName);
      if (!name) throw new InvalidArgumentError('domain_name is required');
      const found = await deps.repo.findForSending(teamId, name);
      if (!found) throw new NotFoundError(`Domain ${name} is not registered in this team`);
      const { record, sealedKey } = found;
      if (record.status !== 'SUCCESS') {
        throw new FailedPreconditionError(`Domain ${name} is not verified (status ${record.status}); verify it with PUT /v1/domains/${record.id}/verify`);
      }
      let dkimPrivateKeyPem: string;
      try {
        dkimPrivateKeyPem = deps.sealer.open(sealedKey, record.id);
      } catch (err) {
        if (!(err instanceof KeyUnsealError)) throw err;
        deps.logger.error({ domainId: record.id, reason: err.message }, 'DKIM private key cannot be decrypted');
        throw new InternalError('DKIM key of the domain cannot be decrypted');
      }
      return {
        domainId: record.id,
        domainName: record.name,
        status: statusToProto(record.status),
        dkimSelector: record.dkimSelector,
        dkimPrivateKeyPem,
        clickTracking: record.clickTracking,
        openTracking: record.openTracking,
        mailFromDomain: record.mailFromHost,
      };
    },
  };
}
