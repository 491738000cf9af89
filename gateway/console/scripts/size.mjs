// Prints the gzipped size of the JavaScript the first page load needs (the entry chunk and the chunks
// index.html preloads), and fails the build above the budget: pages are lazy chunks and do not count.
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';

const BUDGET = 200 * 1024;
const dist = new URL('../dist/', import.meta.url).pathname;
const html = fs.readFileSync(path.join(dist, 'index.html'), 'utf8');
const files = [...html.matchAll(/(?:src|href)="\/?(assets\/[^"]+\.js)"/g)].map((m) => m[1]);
let total = 0;
for (const f of new Set(files)) total += gzipSync(fs.readFileSync(path.join(dist, f))).length;
const kb = (total / 1024).toFixed(1);
process.stdout.write(`[console] initial JS: ${kb} KB gzipped (${files.length} files, budget ${BUDGET / 1024} KB)\n`);
if (total > BUDGET) {
  process.stderr.write('[console] over the initial JS budget: lazy-load more\n');
  process.exit(1);
}
