// The webhook receiver of the bench's events phase, on a thread of its own. A subscriber's endpoint is a
// server of its own: sharing the bench's event loop, which publishes 500 events a second and polls the API
// every 20 ms, made every answer wait behind the load generator, and the platform's posts to it with them.
// The thread answers each post 200 at once and notes when each event id first arrived (testkit's HTTPS
// receiver, signed by the CA the platform trusts); the arrivals reach the bench's thread in batches.
import path from 'node:path';
import { clearInterval, setInterval } from 'node:timers';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

/** How often the receiver's thread sends what arrived since its last batch. */
const REPORT_MS = 20;

/**
 * Starts the receiver's thread. `onArrivals(list)` gets [eventId, epochMs] pairs (first arrivals only), in
 * order. Resolves to {url, close()}; close() stops the server and the thread after a last batch.
 */
export async function startArrivalReceiver({ repoRoot, caDir, onArrivals }) {
  const worker = new Worker(new URL(import.meta.url), { workerData: { role: 'arrival-receiver', repoRoot, caDir } });
  // A failure stops the thread: arrivals end there, and the bench reports the rest missing.
  worker.on('error', (error) => process.stderr.write(`[bench] arrival receiver failed: ${error.stack ?? error}\n`));
  let exited = false;
  const gone = new Promise((resolve) => worker.once('exit', () => {
    exited = true;
    resolve();
  }));
  const url = await new Promise((resolve, reject) => {
    worker.once('error', reject);
    gone.then(() => reject(new Error('arrival receiver stopped before it listened')));
    worker.on('message', (m) => {
      if (m.url) {
        worker.off('error', reject);
        resolve(m.url);
      } else if (m.arrivals) onArrivals(m.arrivals);
    });
  });
  return {
    url,
    close: () => {
      if (!exited) worker.postMessage('close');
      return gone;
    },
  };
}

if (!isMainThread && workerData?.role === 'arrival-receiver') {
  const imp = (rel) => import(new URL(`file://${path.join(workerData.repoRoot, rel)}`).href);
  const { loadTestCa } = await imp('services/testkit/dist/test-ca.js');
  const { startHttpsReceiver } = await imp('services/testkit/dist/https-receiver.js');
  const seen = new Set();
  let batch = [];
  const receiver = await startHttpsReceiver({ ca: await loadTestCa(workerData.caDir) });
  receiver.setResponse((request) => {
    const at = Date.now();
    try {
      const id = JSON.parse(request.rawBody.toString('utf8')).id;
      if (typeof id === 'string' && !seen.has(id)) {
        seen.add(id);
        batch.push([id, at]);
      }
    } catch {
      // not JSON: not one of ours
    }
    return { status: 200 };
  });
  const report = () => {
    if (batch.length === 0) return;
    parentPort.postMessage({ arrivals: batch });
    batch = [];
  };
  const timer = setInterval(report, REPORT_MS);
  parentPort.on('message', async (m) => {
    if (m !== 'close') return;
    clearInterval(timer);
    await receiver.close();
    report();
    parentPort.close();
  });
  parentPort.postMessage({ url: receiver.url });
}
