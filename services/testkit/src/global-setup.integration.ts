// vitest globalSetup of the `integration` project: one FerretDB and one NATS
// (JetStream) per run on free loopback ports, data in a temp dir. Tests get
// mongoUrl / natsUrl through inject(), and stop/start NATS through the control
// endpoint (infraControlUrl) since they run in worker processes.
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { ensureBinaries, fileLogSink, startFerretDb, startNats, type FerretDbServer, type NatsServer } from '@mailfleet/deploy';
import { startControlServer, type ControlServer } from './control-server.js';
import './provided.js';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mailfleet-integration-'));
  const log = fileLogSink(path.join(dataDir, 'logs'));
  let ferret: FerretDbServer | undefined;
  let nats: NatsServer | undefined;
  let control: ControlServer | undefined;
  let stopInstances: () => Promise<unknown> = async () => undefined;

  const teardown = async (): Promise<void> => {
    await control?.close();
    await Promise.all([nats?.stop(), ferret?.stop(), stopInstances()]);
    if (!process.env['MAILFLEET_KEEP_TEST_DATA']) await fsp.rm(dataDir, { recursive: true, force: true });
  };

  try {
    const externalMongo = process.env['MONGO_URL'];
    await ensureBinaries({ only: externalMongo ? ['natsServer'] : ['natsServer', 'ferretdb'] });
    [ferret, nats] = await Promise.all([
      externalMongo ? Promise.resolve(undefined) : startFerretDb({ port: 0, dataDir, log, logLevel: process.env['FERRETDB_LOG_LEVEL'] ?? 'error' }),
      startNats({ port: 0, dataDir, log }),
    ]);
    const shared = nats;
    const instances = new Map<string, NatsServer>();
    // A named instance is created on its first start; no name means the shared server.
    const pick = async (body: Record<string, unknown>, create = false): Promise<NatsServer> => {
      const name = body['instance'];
      if (name === undefined || name === null || name === '') return shared;
      if (typeof name !== 'string' || !/^[\w.-]{1,80}$/.test(name)) throw new Error(`bad NATS instance name ${String(name)}`);
      const known = instances.get(name);
      if (known) return known;
      if (!create) throw new Error(`no NATS instance named ${name}; startNats({instance}) creates it`);
      const server = await startNats({ port: 0, dataDir: path.join(dataDir, 'instances', name), log, name: `nats-${name}` });
      instances.set(name, server);
      return server;
    };
    stopInstances = () => Promise.all([...instances.values()].map((s) => s.stop()));
    control = await startControlServer({
      'POST /nats/stop': async (body) => (await pick(body)).stop(),
      'POST /nats/start': async (body) => {
        const server = await pick(body, true);
        await server.start();
        return { url: server.url };
      },
      'POST /nats/restart': async (body) => (await pick(body)).restart(),
      'POST /nats/kill': async (body) =>
        (await pick(body)).kill((body['signal'] as NodeJS.Signals | undefined) ?? 'SIGKILL'),
      'POST /nats/url': async (body) => ({ url: (await pick(body)).url }),
    });
    project.provide('mongoUrl', externalMongo ?? ferret!.url);
    project.provide('natsUrl', nats.url);
    project.provide('infraControlUrl', control.url);
  } catch (error) {
    await teardown();
    throw error;
  }
  return teardown;
}
