/**
 * Typed configuration read from an environment map. Every field is parsed and
 * every problem collected, so a misconfigured process reports all of them at
 * once instead of failing on the first and hiding the rest.
 */
export type Env = Readonly<Record<string, string | undefined>>;

export interface FieldSpec<T> {
  readonly env: string;
  readonly parse: (raw: string) => T;
  readonly default?: T;
  readonly required: boolean;
  readonly secret?: boolean;
}

export class ConfigError extends Error {
  constructor(public readonly problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Specs = Record<string, FieldSpec<unknown>>;
export type ConfigOf<S extends Specs> = { readonly [K in keyof S]: S[K] extends FieldSpec<infer T> ? T : never };

export function loadConfig<S extends Specs>(specs: S, env: Env): ConfigOf<S> {
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(specs)) {
    const raw = env[spec.env];
    if (raw === undefined || raw === '') {
      if (spec.default !== undefined) out[key] = spec.default;
      else if (spec.required) problems.push(`${spec.env} is required`);
      else out[key] = undefined;
      continue;
    }
    try {
      out[key] = spec.parse(raw);
    } catch (err) {
      const shown = spec.secret ? '<redacted>' : JSON.stringify(raw);
      problems.push(`${spec.env}=${shown}: ${(err as Error).message}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return out as ConfigOf<S>;
}

function field<T>(env: string, parse: (raw: string) => T, def: T | undefined, required = def === undefined): FieldSpec<T> {
  return def === undefined ? { env, parse, required } : { env, parse, default: def, required };
}

export const str = (env: string, def?: string): FieldSpec<string> => field(env, (r) => r, def);
export const optionalStr = (env: string): FieldSpec<string | undefined> => field<string | undefined>(env, (r) => r, undefined, false);
export const secret = (env: string, minLength = 16): FieldSpec<string> => ({
  ...field(env, (r) => {
    if (r.length < minLength) throw new Error(`must be at least ${minLength} characters`);
    return r;
  }, undefined),
  secret: true,
});

export const int = (env: string, def?: number, min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER): FieldSpec<number> =>
  field(env, (r) => {
    if (!/^-?\d+$/.test(r.trim())) throw new Error('must be an integer');
    const n = Number(r);
    if (n < min || n > max) throw new Error(`must be between ${min} and ${max}`);
    return n;
  }, def);

export const port = (env: string, def?: number): FieldSpec<number> => int(env, def, 0, 65535);

export const bool = (env: string, def?: boolean): FieldSpec<boolean> =>
  field(env, (r) => {
    const v = r.trim().toLowerCase();
    if (['1', 'true', 'yes', 'on'].includes(v)) return true;
    if (['0', 'false', 'no', 'off'].includes(v)) return false;
    throw new Error('must be true or false');
  }, def);

export const url = (env: string, protocols: readonly string[], def?: string): FieldSpec<string> =>
  field(env, (r) => {
    let u: URL;
    try {
      u = new URL(r);
    } catch {
      throw new Error('must be a URL');
    }
    if (!protocols.includes(u.protocol.replace(/:$/, ''))) throw new Error(`must use ${protocols.join(' or ')}`);
    return r;
  }, def);

export const oneOf = <T extends string>(env: string, values: readonly T[], def?: T): FieldSpec<T> =>
  field(env, (r) => {
    if (!(values as readonly string[]).includes(r)) throw new Error(`must be one of ${values.join(', ')}`);
    return r as T;
  }, def);

/** `host:port` of a gRPC upstream. */
export const address = (env: string, def?: string): FieldSpec<string> =>
  field(env, (r) => {
    if (!/^[\w.-]+:\d{1,5}$|^\[[\da-f:]+\]:\d{1,5}$/i.test(r)) throw new Error('must be host:port');
    return r;
  }, def);

/** Comma list of `host[:port]`. */
export const hostList = (env: string, def?: string[]): FieldSpec<string[]> =>
  field(env, (r) => {
    const items = r.split(',').map((s) => s.trim()).filter(Boolean);
    if (items.length === 0) throw new Error('must list at least one host');
    return items;
  }, def);
