import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../../src/app.js';
import { v1Areas } from '../../../src/routes/v1/index.js';
import { schemaSource } from '../../scripts/openapi.mjs';

describe('the console typed client', () => {
  it('src/api/schema.ts matches the gateway routes (regenerate: npx tsc -b && npm run console:gen)', async () => {
    const committed = fs.readFileSync(new URL('../../src/api/schema.ts', import.meta.url), 'utf8');
    const fresh = await schemaSource({ buildApp, v1Areas });
    expect(committed === fresh, 'gateway/console/src/api/schema.ts is stale: run `npx tsc -b && npm run console:gen`').toBe(true);
  });

  it('covers the routes the console calls', async () => {
    const fresh = await schemaSource({ buildApp, v1Areas });
    for (const p of ['"/v1/emails"', '"/v1/domains"', '"/v1/api-keys"', '"/v1/settings"']) expect(fresh).toContain(p);
  });
});
