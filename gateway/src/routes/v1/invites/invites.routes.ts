import { domainsV1, type authV1 } from '@mailfleet/proto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { toSessionView } from '../../../clients/sessions.js';
import type { Upstreams } from '../../../clients/upstreams.js';
import { ownOrigin, principalOf, setSessionCookie, type CookieOptions } from '../../../plugins/auth.plugin.js';
import { GatewayError } from '../../../plugins/errors.plugin.js';
import { errorCodeResponse, idParam, iso, successResponse, timestamp } from '../../../schemas/common.js';
import { sessionSchema } from '../session/session.routes.js';

const invite = {
  type: 'object',
  required: ['id', 'email', 'createdAt', 'expiresAt', 'acceptedAt'],
  properties: { id: { type: 'string' }, email: { type: 'string' }, createdAt: timestamp, expiresAt: timestamp, acceptedAt: { type: ['string', 'null'], format: 'date-time' } },
} as const;

function toInvite(i: authV1.Invite) {
  return { id: i.id, email: i.email, createdAt: iso(i.createdAt), expiresAt: iso(i.expiresAt), acceptedAt: iso(i.acceptedAt) };
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * Mails the invite through the platform itself: from `no-reply@` the team's oldest verified domain, as any
 * send of the team (quota, suppressions, tracking settings and events apply). The gateway composes it
 * because auth must not call emails (emails calls auth to admit every send) and only the gateway knows the
 * link's origin. The idempotency key is the invite's id, so a retried request sends it once. Returns
 * false when the team has no verified domain or the send is refused (quota, suppressed address): the link
 * is shown to the inviter either way.
 */
async function mailInvite(
  upstreams: Pick<Upstreams, 'domains' | 'emails'>, req: FastifyRequest, teamId: string, teamName: string, inv: authV1.Invite, url: string,
): Promise<boolean> {
  try {
    const { domains } = await upstreams.domains.call.listDomains({ teamId });
    const verified = domains.filter((d) => d.status === domainsV1.DomainStatus.DOMAIN_STATUS_SUCCESS)
      .sort((a, b) => (a.createdAt?.getTime() ?? 0) - (b.createdAt?.getTime() ?? 0))[0];
    if (!verified) return false;
    const subject = `You are invited to ${teamName} on mailfleet`;
    await upstreams.emails.call.sendEmail({
      teamId,
      email: {
        to: [inv.email], from: `mailfleet <no-reply@${verified.name}>`, subject,
        text: `${subject}.\n\nOpen this link to join (it works once, until ${iso(inv.expiresAt)}):\n${url}\n`,
        html: `<p>${escapeHtml(subject)}.</p><p><a href="${escapeHtml(url)}">Join ${escapeHtml(teamName)}</a> (the link works once, until ${escapeHtml(iso(inv.expiresAt) ?? '')}).</p>`,
        replyTo: [], cc: [], bcc: [], headers: {}, attachments: [],
      },
      idempotencyKey: `invite:${inv.id}`,
    });
    return true;
  } catch (err) {
    req.log.warn({ err, inviteId: inv.id }, 'invite not mailed; the link is shown to the inviter');
    return false;
  }
}

/** Invites to the current team (contract: Users and invites); acceptance is public and signs the person in. */
export function invitesRoutes(deps: { upstreams: Upstreams } & CookieOptions) {
  const { auth } = deps.upstreams;
  return async (app: FastifyInstance): Promise<void> => {
    app.post<{ Body: { email: string } }>('/invites', {
      schema: {
        tags: ['Users'],
        summary: 'Invite a person to the current team; the one-time link is returned only this once',
        body: { type: 'object', required: ['email'], additionalProperties: false, properties: { email: { type: 'string', minLength: 3, maxLength: 254 } } },
        response: {
          201: {
            type: 'object', required: ['id', 'email', 'url', 'expiresAt', 'mailed'],
            properties: {
              id: { type: 'string' }, email: { type: 'string' }, url: { type: 'string', description: '<origin>/invite#token=mfi_...' }, expiresAt: timestamp,
              mailed: { type: 'boolean', description: 'also sent through the platform from a verified domain of the team' },
            },
          },
        },
      },
    }, async (req, reply) => {
      const p = principalOf(req);
      const res = await auth.call.createInvite({ teamId: p.teamId, email: req.body.email, invitedByUserId: p.userId });
      const inv = res.invite!;
      const url = `${ownOrigin(req, deps.publicUrl)}/invite#token=${res.token}`;
      const teamName = p.session?.team.name ?? (await auth.call.getSettings({ teamId: p.teamId })).settings?.name ?? 'your team';
      const mailed = await mailInvite(deps.upstreams, req, p.teamId, teamName, inv, url);
      return reply.code(201).send({ id: inv.id, email: inv.email, url, expiresAt: iso(inv.expiresAt), mailed });
    });

    app.get('/invites', {
      schema: {
        tags: ['Users'], summary: 'The current team\'s invites, newest first',
        response: { 200: { type: 'object', required: ['data'], properties: { data: { type: 'array', items: invite } } } },
      },
    }, async (req) => ({ data: (await auth.call.listInvites({ teamId: principalOf(req).teamId })).invites.map(toInvite) }));

    app.delete<{ Params: { id: string } }>('/invites/:id', {
      schema: { tags: ['Users'], summary: 'Withdraw an invite', params: idParam, response: { 200: successResponse } },
    }, async (req) => {
      await auth.call.deleteInvite({ teamId: principalOf(req).teamId, inviteId: req.params.id });
      return { success: true };
    });

    app.post<{ Body: { token: string; password: string; name?: string } }>('/invites/accept', {
      config: { public: true, originCheck: true },
      schema: {
        tags: ['Users'],
        summary: 'Accept an invite: creates the user (or checks an existing user\'s password), joins the team, signs in',
        security: [],
        body: {
          type: 'object', required: ['token', 'password'], additionalProperties: false,
          properties: {
            token: { type: 'string', minLength: 1, maxLength: 200 }, password: { type: 'string', minLength: 1, maxLength: 1024 },
            name: { type: 'string', maxLength: 100 },
          },
        },
        response: { 200: sessionSchema, 400: errorCodeResponse, 401: errorCodeResponse, 429: errorCodeResponse },
      },
    }, async (req, reply) => {
      const res = await auth.call.acceptInvite({ token: req.body.token, password: req.body.password, name: req.body.name, clientIp: req.ip });
      if (res.rateLimited) {
        reply.header('retry-after', String(res.retryAfterSeconds));
        throw new GatewayError(429, `Too many failed sign-in attempts; retry in ${res.retryAfterSeconds} s`);
      }
      const view = toSessionView(res.session);
      setSessionCookie(req, reply, deps, res.token);
      const { user, team, teams, expiresAt } = view;
      return { user, team, teams, expiresAt };
    });
  };
}
