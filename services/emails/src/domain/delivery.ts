/**
 * What one delivery attempt to the relay means for an email: which
 * recipients the relay took, which it refused for good (a 5xx: a synchronous
 * hard bounce), which it deferred (a 4xx: try again later), or whether the
 * whole attempt failed (connection fault, timeout, 4xx on the message: retry;
 * 5xx on the message: rejected).
 */

/** The fields of a nodemailer SMTP error we read. */
export interface SmtpErrorLike {
  readonly code?: string | undefined;
  readonly responseCode?: number | undefined;
  readonly response?: string | undefined;
  readonly command?: string | undefined;
  readonly message?: string | undefined;
  readonly recipient?: string | undefined;
  readonly rejectedErrors?: readonly SmtpErrorLike[] | undefined;
}

export interface RecipientRefusal {
  readonly recipient: string;
  readonly responseCode: number;
  readonly response: string;
}

export type AttemptResult =
  | {
      readonly kind: 'accepted';
      /** Envelope recipients the relay took. */
      readonly accepted: readonly string[];
      /** 5xx at RCPT: hard bounces. */
      readonly refused: readonly RecipientRefusal[];
      /** 4xx at RCPT: to retry. */
      readonly deferred: readonly RecipientRefusal[];
      readonly response: string;
    }
  | { readonly kind: 'recipients-refused'; readonly refused: readonly RecipientRefusal[]; readonly deferred: readonly RecipientRefusal[] }
  | { readonly kind: 'rejected'; readonly responseCode: number; readonly message: string }
  | { readonly kind: 'transient'; readonly message: string };

function refusals(errors: readonly SmtpErrorLike[] | undefined): { refused: RecipientRefusal[]; deferred: RecipientRefusal[] } {
  const refused: RecipientRefusal[] = [];
  const deferred: RecipientRefusal[] = [];
  for (const e of errors ?? []) {
    const r: RecipientRefusal = { recipient: (e.recipient ?? '').toLowerCase(), responseCode: e.responseCode ?? 0, response: e.response ?? e.message ?? '' };
    if (r.responseCode >= 500 && r.responseCode < 600) refused.push(r);
    else deferred.push(r);
  }
  return { refused, deferred };
}

/** A successful sendMail: the accepted recipients and per-recipient refusals. */
export function resultOfSuccess(info: { accepted?: readonly unknown[]; rejectedErrors?: readonly SmtpErrorLike[]; response?: string }): AttemptResult {
  const accepted = (info.accepted ?? []).map((a) => String(typeof a === 'object' && a !== null && 'address' in a ? (a as { address: unknown }).address : a).toLowerCase());
  const { refused, deferred } = refusals(info.rejectedErrors);
  return { kind: 'accepted', accepted, refused, deferred, response: info.response ?? '' };
}

/** A failed sendMail. */
export function resultOfError(err: SmtpErrorLike): AttemptResult {
  if (err.code === 'EENVELOPE' && err.command === 'RCPT TO' && err.rejectedErrors && err.rejectedErrors.length > 0) {
    return { kind: 'recipients-refused', ...refusals(err.rejectedErrors) };
  }
  const code = err.responseCode;
  const message = (err.response ?? err.message ?? 'delivery attempt failed').slice(0, 1000);
  if (code !== undefined && code >= 500 && code < 600) return { kind: 'rejected', responseCode: code, message };
  return { kind: 'transient', message };
}

/**
 * Delay before attempt `failedAttempts + 1`: base x 2^(n-1), capped, with
 * up to 20% jitter so a relay outage does not bring every email back at the
 * same instant.
 */
export function retryDelayMs(failedAttempts: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const exp = Math.min(maxMs, baseMs * 2 ** Math.max(0, failedAttempts - 1));
  return Math.round(exp * (1 + 0.2 * random()));
}
