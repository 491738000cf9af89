// A minimal SMTP client for measuring a sink: Nagle off, MAIL/RCPT/DATA pipelined, one recipient a
// message. nodemailer leaves Nagle on and writes a message in several pieces, so each message waits for
// the server's delayed ACK (40 ms on Linux) and a pool of 5 cannot pass ~7,500 mails/min whatever the
// server; with Nagle off its own CPU (~45,000/min here) is the limit. This client costs little CPU, so
// the server is what is measured.
import net from 'node:net';

/**
 * Sends `messages` messages over `connections` connections to host:port; resolves to
 * `{accepted, failed}`. `from` is the envelope sender ('' = null sender: the mailbox simulator sends no
 * report back). Stops early when `signal` aborts.
 */
export async function pipelinedSend({ host = '127.0.0.1', port, connections = 10, messages, from = '', html, signal }) {
  let next = 0;
  let accepted = 0;
  let failed = 0;
  async function sender() {
    const socket = net.connect({ host, port });
    socket.setNoDelay(true);
    const waiting = [];
    const replies = [];
    let buf = '';
    let closed = false;
    const fail = () => {
      closed = true;
      for (const w of waiting.splice(0)) w(0);
    };
    socket.on('error', fail);
    socket.on('close', fail);
    socket.on('data', (chunk) => {
      buf += chunk.toString('latin1');
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (/^\d{3}-/.test(line)) continue;
        const code = Number(line.slice(0, 3));
        const w = waiting.shift();
        if (w) w(code);
        else replies.push(code);
      }
    });
    const reply = () => (replies.length ? Promise.resolve(replies.shift()) : closed ? Promise.resolve(0) : new Promise((r) => waiting.push(r)));
    try {
      if ((await reply()) !== 220) return;
      socket.write('EHLO client\r\n');
      await reply();
      while (next < messages && !closed && !signal?.aborted) {
        const i = next++;
        const to = `reader+${i}@inbox.mailfleet-bench.test`;
        socket.write(`MAIL FROM:<${from}>\r\nRCPT TO:<${to}>\r\nDATA\r\n`);
        const codes = [await reply(), await reply(), await reply()];
        if (codes[2] !== 354) {
          failed += 1;
          socket.write('RSET\r\n');
          await reply();
          continue;
        }
        socket.write(`From: bench@mailfleet-bench.test\r\nTo: ${to}\r\nSubject: bench ${i}\r\nMIME-Version: 1.0\r\nContent-Type: text/html\r\n\r\n${html}\r\n.\r\n`);
        if ((await reply()) === 250) accepted += 1;
        else failed += 1;
      }
    } finally {
      socket.end('QUIT\r\n');
    }
  }
  await Promise.all(Array.from({ length: connections }, sender));
  return { accepted, failed };
}

/**
 * A minimal SMTP server on 127.0.0.1 that answers every command (PIPELINING offered, Nagle off, as smtp-server's
 * replies to pipelined commands go out at once), stores nothing and counts completed messages. With `replyDelayMs`
 * every reply leaves that long after it is due, in order: a relay a round trip away. Resolves to
 * `{port, count(), close()}`.
 */
export async function countingSmtpServer({ replyDelayMs = 0 } = {}) {
  let messages = 0;
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    const reply = (text, end = false) => {
      const send = () => {
        if (!socket.writable) return;
        if (end) socket.end(text);
        else socket.write(text);
      };
      if (replyDelayMs > 0) setTimeout(send, replyDelayMs);
      else send();
    };
    let inData = false;
    let buf = '';
    socket.write('220 counter\r\n');
    socket.on('data', (chunk) => {
      buf += chunk.toString('latin1');
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (inData) {
          if (line === '.') {
            inData = false;
            messages += 1;
            reply('250 ok\r\n');
          }
        } else if (/^DATA$/i.test(line)) {
          inData = true;
          reply('354 go\r\n');
        } else if (/^QUIT/i.test(line)) reply('221 bye\r\n', true);
        else if (/^EHLO/i.test(line)) reply('250-counter\r\n250 PIPELINING\r\n');
        else reply('250 ok\r\n');
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: server.address().port, count: () => messages, close: () => server.close() };
}
