import { describe, expect, it } from 'vitest';
import { errorMessage, inviteToken, safeNext } from '../../src/lib/links.js';

describe('console helpers', () => {
  it('sends the user back only to a path of the console after sign-in', () => {
    expect(safeNext('/emails?page=2')).toBe('/emails?page=2');
    for (const evil of ['https://evil.example', '//evil.example/x', '/\\evil.example', 'javascript:alert(1)', '', null]) expect(safeNext(evil)).toBe('/');
  });

  it('reads the invite token from the fragment', () => {
    expect(inviteToken('#token=mfi_abc')).toBe('mfi_abc');
    expect(inviteToken('')).toBeNull();
  });

  it("shows the API's own message for each error form the gateway uses", () => {
    expect(errorMessage({ code: 'NOT_FOUND', message: 'Email not found' }, 404)).toEqual({ message: 'Email not found', code: 'NOT_FOUND' });
    expect(errorMessage({ error: { code: 'BAD_REQUEST', message: 'Invalid email' } }, 400)).toEqual({ message: 'Invalid email', code: 'BAD_REQUEST' });
    expect(errorMessage({ error: 'Domain not found' }, 404)).toEqual({ message: 'Domain not found' });
    expect(errorMessage({ success: false, message: 'Address is not suppressed' }, 404).message).toBe('Address is not suppressed');
    expect(errorMessage(undefined, 502)).toEqual({ message: 'Request failed (HTTP 502)' });
  });
});
