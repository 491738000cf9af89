#!/usr/bin/env node
// `npx mailfleet` from the repository root. The command is compiled TypeScript
// (npm start and npm test build it); this shim says so when it is missing.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/cli/mailfleet.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('mailfleet: not built yet; run `npm run build` (or `npm start`) first\n');
  process.exit(1);
}
const { main } = await import(entry.href);
await main();
