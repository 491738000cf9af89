// npm run console:gen — rewrites src/api/schema.ts from the built gateway (run `npx tsc -b` first).
import fs from 'node:fs';
import { buildApp } from '../../dist/app.js';
import { v1Areas } from '../../dist/routes/v1/index.js';
import { schemaSource } from './openapi.mjs';

const target = new URL('../src/api/schema.ts', import.meta.url);
fs.writeFileSync(target, await schemaSource({ buildApp, v1Areas }));
process.stderr.write(`[console] wrote ${target.pathname}\n`);
