import fs from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../../src/app.js';
import { v1Areas } from '../../../src/routes/v1/index.js';
import { schemaSource } from '../../scripts/openapi.mjs';

let fresh = '';
// Building the whole app (every area's schemas) and running openapi-typescript takes seconds on a busy machine.
beforeAll(async () => {
  fresh = await schemaSource({ buildApp, v1Areas });
}, 120_000);

describe('the console typed client', () => {
  it('src/api/schema.ts matches the gateway routes (regenerate: npm run console:gen)', () => {
    const committed = fs.readFileSync(new URL('../../src/api/schema.ts', import.meta.url), 'utf8');
    expect(committed === fresh, 'gateway/console/src/api/schema.ts is stale: run `npm run console:gen`').toBe(true);
  });

  it('covers the routes the console calls', () => {
    for (const p of ['"/v1/emails"', '"/v1/domains"', '"/v1/api-keys"', '"/v1/settings"', '"/v1/session"', '"/v1/users"', '"/v1/invites"', '"/v1/dev/inbox"']) {
      expect(fresh).toContain(p);
    }
  });
});
