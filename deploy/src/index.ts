export { ensureBinaries, resolveBinaries, testPatchedFerretDb, NATS_SERVER_MODULE, type Binaries, type EnsureBinariesOptions } from './binaries.js';
export { startNats, type NatsServer, type StartNatsOptions } from './nats.js';
export { startFerretDb, type FerretDbServer, type StartFerretDbOptions } from './ferretdb.js';
export {
  createSmtpSink,
  listSinkMessages,
  createSinkReader,
  type SinkReader,
  type SinkLayout,
  type SmtpSink,
  type SmtpSinkOptions,
  type SinkMessage,
  type SinkEnvelope,
} from './smtp-sink.js';
export {
  startPlatform,
  localModeOn,
  SERVICE_NAMES,
  DEFAULT_PORTS,
  PASSTHROUGH_ENV,
  type Platform,
  type PlatformOptions,
  type PlatformPorts,
  type ServiceName,
  type ChildExitReport,
} from './platform.js';
export { createHealthProbe, probeHttp, type HealthProbe } from './health.js';
export { consoleLogSink, fileLogSink, teeLogSink, silentLogSink, type LogSink, type LogStream } from './logs.js';
export { ManagedProcess, describeExit, type ExitInfo, type ManagedProcessOptions } from './process.js';
export { findFreePort, findFreePorts, canConnect, pollUntil, LOOPBACK } from './net.js';
export { repoRoot, defaultDataDir, defaultBinDir } from './paths.js';
export { LOCAL_SECRETS, loadLocalSecrets } from './local-secrets.js';
export { DOMAIN_VERIFY_TEST_CLOCK } from './test-clock.js';
export {
  startDnsServer,
  type DnsServer,
  type DnsRecordType,
  type DnsRecordValues,
  type DnsFailureMode,
  type MxRecord,
  type TxtRecord,
  type DnsQueryLog,
  type StartDnsServerOptions,
} from './dns-server.js';
export {
  startLocalDns,
  readLocalDnsState,
  localDnsDir,
  verifyDkim,
  type LocalDns,
  type LocalDnsRecord,
  type LocalDnsState,
  type StartLocalDnsOptions,
  type DkimResult,
} from './local-dns.js';
export { readMailStore, type StoredMessage } from './mail-store.js';
