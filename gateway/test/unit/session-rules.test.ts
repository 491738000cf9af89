import { describe, expect, it } from 'vitest';
import { originAllowed, ownOrigin, readCookie, sessionCookie } from '../../src/plugins/auth.plugin.js';

describe('the CSRF Origin rule', () => {
  const own = 'https://mail.example.com';
  it('lets safe methods through whatever their Origin', () => {
    for (const m of ['GET', 'HEAD', 'OPTIONS']) expect(originAllowed(m, 'https://evil.example', own)).toBe(true);
  });
  it('refuses a state-changing request without the gateway\'s own origin', () => {
    for (const m of ['POST', 'PUT', 'PATCH', 'DELETE', 'post']) {
      expect(originAllowed(m, own, own)).toBe(true);
      expect(originAllowed(m, 'https://evil.example', own)).toBe(false);
      expect(originAllowed(m, 'http://mail.example.com', own)).toBe(false);
      expect(originAllowed(m, 'https://mail.example.com:8443', own)).toBe(false);
      expect(originAllowed(m, 'null', own)).toBe(false);
      expect(originAllowed(m, undefined, own)).toBe(false);
    }
  });
  it('takes the own origin from PUBLIC_URL when set, else from the request', () => {
    expect(ownOrigin({ protocol: 'http', host: '127.0.0.1:3000' }, 'https://Mail.Example.com/console/')).toBe('https://mail.example.com');
    expect(ownOrigin({ protocol: 'http', host: 'localhost:3000' }, undefined)).toBe('http://localhost:3000');
  });
});

describe('the session cookie', () => {
  it('is HttpOnly, SameSite=Strict, Path=/, and Secure only over HTTPS', () => {
    const c = sessionCookie('mfs_abc', 3600.7, false);
    expect(c).toBe('mf_session=mfs_abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=3600');
    expect(sessionCookie('mfs_abc', 10, true)).toMatch(/; Secure$/);
    expect(sessionCookie('', -5, false)).toContain('Max-Age=0');
  });
  it('is read from a Cookie header among others', () => {
    expect(readCookie('a=1; mf_session=mfs_x; b=2', 'mf_session')).toBe('mfs_x');
    expect(readCookie('xmf_session=no', 'mf_session')).toBeUndefined();
    expect(readCookie('mf_session=', 'mf_session')).toBeUndefined();
    expect(readCookie(undefined, 'mf_session')).toBeUndefined();
  });
});
