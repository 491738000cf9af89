import { listSinkMessages } from './deploy/dist/smtp-sink.js';
import { MongoClient } from 'mongodb';
const dir = process.argv[2];
const msgs = await listSinkMessages(dir + '/mail');
const by = new Map();
for (const m of msgs) for (const r of m.rcptTo) { if (!by.has(r)) by.set(r, []); by.get(r).push(m); }
const dups = [...by.entries()].filter(([, l]) => l.length > 1);
console.log('dups', dups.length);
const c = new MongoClient(process.argv[3]); await c.connect();
const db = c.db('mailfleet_emails');
for (const [to, l] of dups.slice(0, 16)) {
  const ids = l.map((m) => /Message-ID: <([^@]+)@/i.exec(m.raw.toString())?.[1]);
  const e = await db.collection('emails').findOne({ _id: ids[0] });
  console.log(to, l.map((m) => m.receivedAt.slice(11,23)).join(' '), ids.join(','), e ? JSON.stringify((e.events ?? []).map((x) => [x.status, x.createdAt ?? x.at, x.data?.attempt ?? x.attempt])).slice(0, 300) : 'no email');
}
if (dups[0]) { const id = /Message-ID: <([^@]+)@/i.exec(dups[0][1][0].raw.toString())?.[1]; console.log(JSON.stringify(await db.collection('emails').findOne({_id: id}, {projection: {html:0, text:0}})).slice(0,2500)); }
await c.close();
