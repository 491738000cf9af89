import { parseArgs } from 'node:util';
import { status, type ServiceError } from '@grpc/grpc-js';
import { createGrpcClient, createLogger, isServiceError, randomBase62 } from '@mailfleet/kit';
import { authV1, domainsV1 } from '@mailfleet/proto';
import { InboxUsageError, runInbox } from './inbox.js';

/**
 * The operator's command line. It talks to the running auth service over gRPC
 * (AUTH_GRPC_ADDR, default 127.0.0.1:50051), so it works the same against
 * `npm start` and inside a cluster (`kubectl exec` into the auth pod).
 */
const USAGE = `mailfleet — operate a mailfleet installation

Usage:
  mailfleet team create --name NAME [--plan FREE|PREMIUM|PRO] [--json]
      Creates a team and a FULL API key; --json prints {"teamId", "token"}.
  mailfleet team list [--json]
  mailfleet team update --team ID [--plan P] [--daily N] [--monthly N] [--rate-limit FAMILY=N ...] [--json]
      Families: SEND_EMAIL BATCH_EMAIL READ_EMAIL FEEDBACK_LIST CONTACT BULK_CONTACT DEFAULT (0 restores the default).
  mailfleet key create --team ID [--name NAME] [--permission FULL|SENDING] [--domain DOMAIN_ID] [--json]
  mailfleet user create --email EMAIL --team TEAM_ID [--name NAME] [--password-stdin] [--json]
      Creates a person who signs in to the console (or adds an existing one to the team). Without
      --password-stdin a password is generated and printed once; --json prints {"userId", "teamId", "email", "created", "password"?}.
  mailfleet inbox [show ID] [--json] [--help]
      Local mode's dev inbox: what the embedded SMTP sink holds; --help lists the mailbox simulator's addresses.

Environment: AUTH_GRPC_ADDR (default 127.0.0.1:50051), DOMAINS_GRPC_ADDR (default 127.0.0.1:50052).
Exit codes: 0 success, 1 the platform refused or could not be reached, 2 usage error.`;

class UsageError extends Error {}

type Out = { json: boolean; print: (text: string) => void };

const PLANS: Record<string, authV1.Plan> = { FREE: authV1.Plan.PLAN_FREE, PREMIUM: authV1.Plan.PLAN_PREMIUM, PRO: authV1.Plan.PLAN_PRO };

function plan(value: string | undefined): authV1.Plan {
  if (value === undefined) return authV1.Plan.PLAN_UNSPECIFIED;
  const p = PLANS[value.toUpperCase()];
  if (!p) throw new UsageError(`--plan must be one of ${Object.keys(PLANS).join(', ')}`);
  return p;
}

function intArg(name: string, value: string | undefined, min: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^-?\d+$/.test(value) || Number(value) < min) throw new UsageError(`--${name} must be an integer >= ${min}`);
  return Number(value);
}

function required(name: string, value: string | undefined): string {
  if (!value) throw new UsageError(`--${name} is required`);
  return value;
}

function planName(p: authV1.Plan): string {
  return authV1.planToJSON(p).replace(/^PLAN_/, '');
}

/** Reads a password from stdin (first line, without its line break), so it never appears in argv or shell history. */
async function readStdinPassword(stdin: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stdin) text += typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('utf8');
  return text.split(/\r?\n/)[0] ?? '';
}

export async function runCli(
  argv: string[], env: NodeJS.ProcessEnv, out: Out = { json: false, print: (t) => process.stdout.write(`${t}\n`) }, stdin: NodeJS.ReadableStream = process.stdin,
): Promise<number> {
  if (argv[0] === 'inbox') return runInbox(argv.slice(1), env, out.print);
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' }, plan: { type: 'string' }, json: { type: 'boolean', default: false }, team: { type: 'string' },
      permission: { type: 'string' }, domain: { type: 'string' }, daily: { type: 'string' }, monthly: { type: 'string' },
      'rate-limit': { type: 'string', multiple: true }, email: { type: 'string' }, 'password-stdin': { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  const [noun, verb] = positionals;
  if (values.help || !noun) {
    out.print(USAGE);
    return values.help ? 0 : 2;
  }
  const json = values.json ?? false;
  const logger = createLogger({ service: 'mailfleet-cli', level: 'silent' });
  const auth = createGrpcClient({ name: 'auth', address: env.AUTH_GRPC_ADDR ?? '127.0.0.1:50051', ctor: authV1.AuthServiceClient, logger, deadlineMs: 10_000 });
  try {
    if (noun === 'team' && verb === 'create') {
      const name = required('name', values.name);
      const { team, userId } = await auth.call.createTeam({ name, plan: plan(values.plan) });
      const { token } = await auth.call.createApiKey({ teamId: team!.id, name: 'default', permission: authV1.Permission.PERMISSION_FULL, createdByUserId: userId });
      out.print(json ? JSON.stringify({ teamId: team!.id, token }) : `team ${team!.id} (${team!.slug}) created\nFULL API key (shown once): ${token}`);
      return 0;
    }
    if (noun === 'team' && verb === 'list') {
      const { teams } = await auth.call.listAllTeams({});
      const rows = teams.map((t) => ({ id: t.id, name: t.name, slug: t.slug, plan: planName(t.plan), createdAt: t.createdAt?.toISOString() }));
      out.print(json ? JSON.stringify(rows) : rows.map((r) => `${r.id}\t${r.plan}\t${r.slug}\t${r.name}`).join('\n') || 'no teams');
      return 0;
    }
    if (noun === 'team' && verb === 'update') {
      const rateLimits: Record<string, number> = {};
      for (const item of values['rate-limit'] ?? []) {
        const m = /^([A-Z_]+)=(\d+)$/.exec(item);
        if (!m?.[1] || m[2] === undefined) throw new UsageError(`--rate-limit expects FAMILY=N, got ${JSON.stringify(item)}`);
        rateLimits[m[1]] = Number(m[2]);
      }
      const res = await auth.call.updateTeamLimits({
        teamId: required('team', values.team), plan: plan(values.plan),
        dailyEmailLimit: intArg('daily', values.daily, 0), monthlyEmailLimit: intArg('monthly', values.monthly, -1), rateLimits,
      });
      const s = res.settings!;
      const view = { teamId: s.teamId, plan: planName(s.plan), dailyEmailLimit: s.dailyEmailLimit, monthlyEmailLimit: s.monthlyEmailLimit, rateLimits: res.rateLimits };
      out.print(json ? JSON.stringify(view) : Object.entries(view).map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join('\n'));
      return 0;
    }
    if (noun === 'key' && verb === 'create') {
      const teamId = required('team', values.team);
      const permission = (values.permission ?? 'FULL').toUpperCase();
      if (permission !== 'FULL' && permission !== 'SENDING') throw new UsageError('--permission must be FULL or SENDING');
      if (values.domain) {
        const domains = createGrpcClient({ name: 'domains', address: env.DOMAINS_GRPC_ADDR ?? '127.0.0.1:50052', ctor: domainsV1.DomainsServiceClient, logger, deadlineMs: 10_000 });
        try {
          await domains.call.getDomain({ teamId, domainId: values.domain });
        } finally {
          domains.close();
        }
      }
      const { token, apiKey } = await auth.call.createApiKey({
        teamId, name: values.name ?? `${permission.toLowerCase()} key`,
        permission: permission === 'SENDING' ? authV1.Permission.PERMISSION_SENDING : authV1.Permission.PERMISSION_FULL,
        domainId: values.domain, createdByUserId: '',
      });
      out.print(json ? JSON.stringify({ keyId: apiKey!.id, teamId, permission, domainId: values.domain ?? null, token }) : `key ${apiKey!.id} created\n${permission} API key (shown once): ${token}`);
      return 0;
    }
    if (noun === 'user' && verb === 'create') {
      const email = required('email', values.email);
      const teamId = required('team', values.team);
      const generated = !values['password-stdin'];
      // 20 base62 characters ~ 119 bits; printed once, only its scrypt hash is stored.
      const password = generated ? randomBase62(20) : await readStdinPassword(stdin);
      const { user, created } = await auth.call.createUser({ email, password, name: values.name, teamId });
      const shownPassword = generated && created ? password : undefined;
      if (json) {
        out.print(JSON.stringify({ userId: user!.id, teamId, email: user!.email, created, ...(shownPassword ? { password: shownPassword } : {}) }));
      } else {
        out.print(created ? `user ${user!.id} (${user!.email}) created in team ${teamId}` : `user ${user!.id} (${user!.email}) already existed: added to team ${teamId}, password unchanged`);
        if (shownPassword) out.print(`password (shown once): ${shownPassword}`);
      }
      return 0;
    }
    throw new UsageError(`unknown command: ${positionals.join(' ')}`);
  } finally {
    auth.close();
  }
}

function describe(err: unknown): string {
  if (isServiceError(err)) {
    const e = err as ServiceError;
    if (e.code === status.UNAVAILABLE || e.code === status.DEADLINE_EXCEEDED) return `cannot reach the platform (${e.details}); is it running (npm start)?`;
    return `${status[e.code]}: ${e.details}`;
  }
  return (err as Error).message;
}

export async function main(argv = process.argv.slice(2)): Promise<never> {
  let code: number;
  try {
    code = await runCli(argv, process.env);
  } catch (err) {
    const errCode = (err as { code?: unknown }).code;
    const usage = err instanceof UsageError || err instanceof InboxUsageError || (typeof errCode === 'string' && errCode.startsWith('ERR_PARSE_ARGS'));
    process.stderr.write(`mailfleet: ${describe(err)}\n${usage ? 'run `mailfleet --help` for usage\n' : ''}`);
    code = usage ? 2 : 1;
  }
  process.exit(code);
}
