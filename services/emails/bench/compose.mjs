// CPU per message of building and DKIM-signing a typical campaign mail: the service's composer
// (src/sending/compose.ts, from dist/: build first) against nodemailer's MailComposer + DKIM signer, which
// it replaced. Not part of `npm run bench`. Run alone on a quiet machine:
//   flock /tmp/mailfleet-bench.lock node services/emails/bench/compose.mjs [--messages 2000] [--rounds 3]
import { generateKeyPairSync, sign } from 'node:crypto';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { composeMessage, createSigningKeys, outgoingHtml } from '../dist/sending/compose.js';
import { deriveKey } from '../dist/domain/tracking.js';

const require = createRequire(import.meta.url);
const MailComposer = require('nodemailer/lib/mail-composer');
const DKIM = require('nodemailer/lib/dkim');

const { values } = parseArgs({ options: { messages: { type: 'string', default: '2000' }, rounds: { type: 'string', default: '3' } } });
const messages = Number(values.messages);
const rounds = Number(values.rounds);

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const identity = { domainId: 'dom_1', domainName: 'mail.example.com', dkimSelector: 'mf1', dkimPrivateKeyPem: pem, clickTracking: true, openTracking: true };
const tracking = { publicUrl: 'https://t.example.com', key: deriveKey('t'.repeat(64), 'tracking') };
const date = new Date('2030-01-01T00:00:00Z');

// About 2 KB of HTML (links to track) and its text version, as a campaign renders them for one contact.
function inputOf(i) {
  const name = `Contact ${i}`;
  const html = `<html><body><h1>Spring news for ${name}</h1>\n${Array.from({ length: 9 }, (_, p) => `<p>Dear ${name}, paragraph ${p} of this month's newsletter tells you what is new. <a href="https://shop.example.com/p/${p}?c=${i}">Read more</a></p>`).join('\n')}\n<p><a href="https://u.example.com/unsubscribe/${i}">Unsubscribe</a></p></body></html>`;
  const text = `Spring news for ${name}\n\n${Array.from({ length: 9 }, (_, p) => `Dear ${name}, paragraph ${p} of this month's newsletter: https://shop.example.com/p/${p}?c=${i}`).join('\n')}\n\nUnsubscribe: https://u.example.com/unsubscribe/${i}\n`;
  const id = `em_${String(i).padStart(8, '0')}`;
  return {
    email: {
      id, from: 'Example Shop <news@mail.example.com>', to: [`contact${i}@example.org`], cc: [], bcc: [], replyTo: [], subject: `Spring news for ${name}`,
      messageId: `<${id}@mail.example.com>`, references: [], hasAttachments: false,
    },
    content: { html, text, headers: [['List-Unsubscribe', `<https://u.example.com/unsubscribe/${i}>`], ['List-Unsubscribe-Post', 'List-Unsubscribe=One-Click']] },
    identity, attachments: [], tracking, date,
  };
}

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** The composer before: MailComposer's stream, then nodemailer's DKIM signer over it. */
async function nodemailerCompose(input, keys) {
  const { email, content } = input;
  const composer = new MailComposer({
    from: email.from, to: [...email.to], subject: email.subject, text: content.text,
    html: outgoingHtml(email.id, content.html, input.identity, input.tracking),
    messageId: email.messageId, date: input.date, headers: content.headers.map(([key, value]) => ({ key, value })), attachments: [],
  });
  const unsigned = await collect(composer.compile().createReadStream());
  const signer = new DKIM({
    domainName: identity.domainName, keySelector: identity.dkimSelector, privateKey: keys.of(pem),
    headerFieldNames: 'from:sender:reply-to:subject:date:message-id:to:cc:mime-version:content-type:content-transfer-encoding:in-reply-to:references:list-unsubscribe:list-unsubscribe-post',
  });
  return collect(signer.sign(unsigned));
}

const inputs = Array.from({ length: messages }, (_, i) => inputOf(i));
const cpuMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };

async function measure(name, run) {
  const startCpu = cpuMs();
  const start = performance.now();
  let bytes = 0;
  for (const input of inputs) bytes += (await run(input)).length;
  return { name, cpu: (cpuMs() - startCpu) / messages, wall: (performance.now() - start) / messages, bytes: bytes / messages };
}

const keys = createSigningKeys();
const contenders = {
  nodemailer: (input) => nodemailerCompose(input, keys),
  direct: (input) => composeMessage({ ...input, signingKeys: keys }),
  'RSA signature alone': async (input) => sign('sha256', Buffer.from(input.email.id.repeat(40)), keys.of(pem)),
  'tracking (outgoingHtml) alone': async (input) => Buffer.from(outgoingHtml(input.email.id, input.content.html, identity, tracking) ?? ''),
};

// Warm up every path, then alternate them round by round so that other load on the machine hits all alike.
for (const run of Object.values(contenders)) for (const input of inputs.slice(0, 200)) await run(input);
const results = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]));
for (let r = 0; r < rounds; r++) for (const [name, run] of Object.entries(contenders)) results[name].push(await measure(name, run));

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`${messages} messages (html ${inputs[0].content.html.length} + text ${inputs[0].content.text.length} characters, 1 recipient, tracking on), ${rounds} rounds, median per message:`);
console.table(Object.entries(results).map(([name, rs]) => ({
  composer: name, 'CPU ms/message': median(rs.map((x) => x.cpu)).toFixed(3), 'wall ms/message': median(rs.map((x) => x.wall)).toFixed(3), 'bytes/message': Math.round(median(rs.map((x) => x.bytes))),
})));
