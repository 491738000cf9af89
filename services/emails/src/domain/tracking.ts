import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Open and click tracking. Links carry a signed token: the payload (email id,
 * kind, target URL) in base64url and an HMAC-SHA256 over it, so nobody can
 * forge an open or a click, or turn the redirect into an open redirect to a
 * URL of their choosing.
 */
export type TrackingKind = 'open' | 'click';

export interface TrackingClaims {
  readonly emailId: string;
  readonly kind: TrackingKind;
  /** Click target (http or https). */
  readonly url?: string | undefined;
}

const SIG_LENGTH = 22; // base64url characters: 132 bits

/** The key tracking tokens are signed with, derived from TRACKING_SIGNING_KEY (which also derives the VERP secret). */
export function deriveKey(master: string, purpose: 'tracking' | 'verp'): string {
  return createHmac('sha256', master).update(`mailfleet ${purpose} v1`).digest('hex');
}

function sign(key: string, payload: string): string {
  return createHmac('sha256', key).update(`track.${payload}`).digest('base64url').slice(0, SIG_LENGTH);
}

export function createTrackingToken(key: string, claims: TrackingClaims): string {
  const body: Record<string, unknown> = { e: claims.emailId, k: claims.kind === 'open' ? 'o' : 'c' };
  if (claims.url !== undefined) body.u = claims.url;
  const payload = Buffer.from(JSON.stringify(body)).toString('base64url');
  return `${payload}.${sign(key, payload)}`;
}

/** The claims of a genuine token; undefined for anything forged, altered or malformed. */
export function verifyTrackingToken(key: string, token: string, kind: TrackingKind): TrackingClaims | undefined {
  if (token.length > 8192) return undefined;
  const dot = token.lastIndexOf('.');
  if (dot <= 0) return undefined;
  const payload = token.slice(0, dot);
  const given = Buffer.from(token.slice(dot + 1));
  const expected = Buffer.from(sign(key, payload));
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  let body: { e?: unknown; k?: unknown; u?: unknown };
  try {
    body = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as typeof body;
  } catch {
    return undefined;
  }
  if (typeof body.e !== 'string' || body.k !== (kind === 'open' ? 'o' : 'c')) return undefined;
  if (kind === 'click' && (typeof body.u !== 'string' || !isHttpUrl(body.u))) return undefined;
  return { emailId: body.e, kind, url: kind === 'click' ? (body.u as string) : undefined };
}

export function isHttpUrl(u: string): boolean {
  try {
    const p = new URL(u);
    return p.protocol === 'http:' || p.protocol === 'https:';
  } catch {
    return false;
  }
}

export function openPixelUrl(publicUrl: string, key: string, emailId: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/v1/track/open?t=${createTrackingToken(key, { emailId, kind: 'open' })}`;
}

export function clickUrl(publicUrl: string, key: string, emailId: string, target: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/v1/track/click?t=${createTrackingToken(key, { emailId, kind: 'click', url: target })}`;
}

function decodeEntities(s: string): string {
  return s
    .replace(/&#x([0-9a-f]+);/gi, (_, h: string) => String.fromCodePoint(parseInt(h, 16)))
    .replace(/&#(\d+);/g, (_, d: string) => String.fromCodePoint(parseInt(d, 10)))
    .replace(/&quot;/g, '"').replace(/&#39;|&apos;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

const ANCHOR_HREF = /(<a\b[^>]*?\bhref\s*=\s*)(?:"([^"]*)"|'([^']*)'|([^\s>"']+))/gi;

/**
 * Rewrites the http(s) links of anchors to tracked redirects. Links to the
 * platform itself (unsubscribe pages, earlier tracking links) and anything
 * that is not http(s) (mailto:, tel:, #anchors) stay as they are.
 */
export function rewriteLinks(html: string, opts: { publicUrl: string; key: string; emailId: string }): string {
  const own = opts.publicUrl.replace(/\/+$/, '');
  return html.replace(ANCHOR_HREF, (whole, head: string, dq?: string, sq?: string, bare?: string) => {
    const raw = dq ?? sq ?? bare ?? '';
    const target = decodeEntities(raw.trim());
    if (!isHttpUrl(target) || target.startsWith(own)) return whole;
    return `${head}"${clickUrl(own, opts.key, opts.emailId, target)}"`;
  });
}

/** Adds the open pixel just before `</body>`, or at the end when there is none. */
export function addOpenPixel(html: string, pixelUrl: string): string {
  const img = `<img src="${pixelUrl}" width="1" height="1" alt="" style="display:block;border:0;width:1px;height:1px" />`;
  const idx = html.toLowerCase().lastIndexOf('</body>');
  return idx === -1 ? `${html}${img}` : `${html.slice(0, idx)}${img}${html.slice(idx)}`;
}

/** A short platform name from a User-Agent (SPEC 6.3 `platform`). */
export function platformOf(userAgent: string): string {
  const ua = userAgent.toLowerCase();
  if (ua === '') return 'Unknown';
  if (/iphone|ipad|ipod|ios\b/.test(ua)) return 'iOS';
  if (ua.includes('android')) return 'Android';
  if (ua.includes('cros')) return 'ChromeOS';
  if (/windows|win32|win64/.test(ua)) return 'Windows';
  if (/macintosh|mac os x|macos|darwin/.test(ua)) return 'macOS';
  if (ua.includes('linux') || ua.includes('x11')) return 'Linux';
  if (/googleimageproxy|yahoomailproxy|outlook|thunderbird/.test(ua)) return 'Mail proxy';
  if (/bot|crawler|spider|curl|wget|python|node|undici|go-http/.test(ua)) return 'Bot';
  return 'Unknown';
}
