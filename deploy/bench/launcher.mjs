// CPU of FerretDB launchers for the write mix of the send path, to compare two builds (a patch before and after):
// per document, an insertMany of 25, two bulk compare-and-set updates by _id (each one update command of 25
// statements) and a bulk delete by _id, 4 such lanes at once. The launcher's own CPU (utime + stime from /proc)
// is reported per document, so the client's work is left out. Not part of `npm run bench`. Run alone on a quiet
// machine; builds alternate:
//   flock /tmp/mailfleet-bench.lock node deploy/bench/launcher.mjs --bin OLD --bin NEW [--docs 6000] [--rounds 3]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { MongoClient } from 'mongodb';
import { canConnect, findFreePort, pollUntil } from '../dist/net.js';

const { values } = parseArgs({ options: { bin: { type: 'string', multiple: true }, docs: { type: 'string', default: '6000' }, rounds: { type: 'string', default: '3' } } });
const bins = values.bin ?? [];
if (bins.length === 0) throw new Error('give one or more launcher binaries with --bin');
const docs = Number(values.docs);
const BATCH = 25;
const LANES = 4;

/** Clock ticks of /proc/<pid>/stat (utime + stime) in ms; USER_HZ is 100 on Linux. */
function cpuMs(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function measure(bin) {
  const port = await findFreePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mailfleet-launcher-bench-'));
  const child = spawn(bin, ['-listen', `127.0.0.1:${port}`, '-data', dir, '-log-level', 'warn'], { stdio: 'ignore' });
  try {
    await pollUntil(`launcher on ${port}`, () => canConnect(port), { timeoutMs: 30_000 });
    const client = await MongoClient.connect(`mongodb://127.0.0.1:${port}/`, { maxPoolSize: 20 });
    try {
      const col = client.db('bench').collection('emails');
      await col.insertOne({ _id: 'warm' });
      const doc = (i) => ({
        _id: `em_${i}`, teamId: 'team_1', status: 'QUEUED', to: [`r${i}@example.net`], subject: `hello ${i}`,
        events: ['{"id":"evt_1","status":"QUEUED"}'], version: 1, createdAt: new Date(), html: 'x'.repeat(600),
      });
      const before = cpuMs(child.pid);
      const start = Date.now();
      await Promise.all(Array.from({ length: LANES }, async (_, lane) => {
        for (let first = lane * BATCH; first < docs; first += LANES * BATCH) {
          const ids = Array.from({ length: Math.min(BATCH, docs - first) }, (_, k) => first + k);
          await col.insertMany(ids.map(doc), { ordered: false });
          await col.bulkWrite(ids.map((i) => ({ updateOne: { filter: { _id: `em_${i}`, version: 1 }, update: { $set: { status: 'SENT', version: 2 }, $push: { events: '{"id":"evt_2","status":"SENT"}' } } } })), { ordered: false });
          await col.bulkWrite(ids.map((i) => ({ updateOne: { filter: { _id: `em_${i}`, version: 2 }, update: { $set: { status: 'DELIVERED', version: 3 } } } })), { ordered: false });
          await col.bulkWrite(ids.map((i) => ({ deleteOne: { filter: { _id: `em_${i}` } } })), { ordered: false });
        }
      }));
      const used = cpuMs(child.pid) - before;
      const wall = Date.now() - start;
      return { perDoc: used / docs, writesPerS: Math.round(((docs * 4) / wall) * 1000) };
    } finally {
      await client.close();
    }
  } finally {
    child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

for (let round = 1; round <= Number(values.rounds); round++) {
  for (const bin of bins) {
    const r = await measure(bin);
    console.log(`round ${round}  ${bin}: ${r.perDoc.toFixed(3)} ms of launcher CPU per document (4 writes), ${r.writesPerS} writes/s`);
  }
}
