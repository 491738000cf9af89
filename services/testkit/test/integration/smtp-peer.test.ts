import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSmtpPeer, type SmtpPeer } from '@mailfleet/testkit';
import fs from 'node:fs';

describe('SMTP sink', () => {
  let peer: SmtpPeer;

  beforeAll(async () => {
    peer = await startSmtpPeer();
  });
  afterAll(() => peer.close());

  it('stores a message sent with nodemailer, raw and with its envelope', async () => {
    const transport = nodemailer.createTransport({ url: peer.url } as nodemailer.TransportOptions);
    const info = await transport.sendMail({
      envelope: { from: 'bounce+abc@bounce.example.test', to: ['a@example.test', 'b@example.test'] },
      from: 'Sender <sender@example.test>',
      to: 'a@example.test',
      subject: 'Hello from the test',
      text: 'plain body',
      html: '<p>html body</p>',
      headers: { 'X-Mailfleet-Test': 'yes' },
    });
    transport.close();
    expect(info.response).toMatch(/^250 /);

    const mail = await peer.waitForMessage((m) => m.parsed.subject === 'Hello from the test', 5000);
    expect(mail.envelope).toEqual({ mailFrom: 'bounce+abc@bounce.example.test', rcptTo: ['a@example.test', 'b@example.test'] });
    expect(mail.parsed.text?.trim()).toBe('plain body');
    expect(mail.parsed.headers.get('x-mailfleet-test')).toBe('yes');
    // Stored exactly as sent, in the sink's log segment: the DATA payload, preceded by a line with its envelope.
    expect(mail.file.endsWith('.sinklog')).toBe(true);
    const segment = fs.readFileSync(mail.file);
    expect(segment.subarray(mail.offset, mail.offset + mail.raw.length)).toEqual(mail.raw);
    expect(mail.raw.toString()).toContain('Subject: Hello from the test');
    const headerLine = segment.subarray(segment.lastIndexOf('\n', mail.offset - 2) + 1, mail.offset - 1).toString();
    expect(JSON.parse(headerLine)).toMatchObject({ mailFrom: 'bounce+abc@bounce.example.test', rcptTo: ['a@example.test', 'b@example.test'], bytes: mail.raw.length });
  });

  it('accepts the null sender (a bounce)', async () => {
    const transport = nodemailer.createTransport({ url: peer.url } as nodemailer.TransportOptions);
    await transport.sendMail({ envelope: { from: '', to: 'someone@example.test' }, raw: 'Subject: dsn\r\n\r\nbounced\r\n' });
    transport.close();
    const mail = await peer.waitForMessage((m) => m.parsed.subject === 'dsn', 5000);
    expect(mail.envelope.mailFrom).toBe('');
  });

  it('waitForMessage names what arrived when nothing matches', async () => {
    await expect(peer.waitForMessage((m) => m.parsed.subject === 'never', 300)).rejects.toThrow(/no matching message .* 2 message\(s\) there/s);
  });
});
