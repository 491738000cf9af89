import './provided.js';

export { testMongoUrl, testNatsUrl, uniqueDbName } from './mongo.js';
export {
  controlRequest,
  stopNats,
  startNats,
  restartNats,
  killNats,
  isolatedNats,
  type NatsInstanceOptions,
  setDnsRecords,
  setDnsFailure,
  clearDnsRecords,
  killChild,
  stopChild,
  startChild,
  restartChild,
  childLogs,
} from './infra-control.js';
export { startSmtpPeer, readMailDir, waitForMail, type SmtpPeer, type ReceivedMail, type MailPredicate } from './smtp-peer.js';
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
export { createTestCa, loadTestCa, type TestCa, type IssuedCert } from './test-ca.js';
export {
  startHttpsReceiver,
  type HttpsReceiver,
  type RecordedRequest,
  type ResponsePlan,
  type Responder,
  type StartHttpsReceiverOptions,
} from './https-receiver.js';
export { startControlServer, type ControlRoutes, type ControlServer } from './control-server.js';
export { startE2eEnvironment, type E2eEnvironment, type E2eProvided, type StartE2eEnvironmentOptions } from './e2e-environment.js';
export { awayFromUtcMidnight } from './day-boundary.js';
export { durablesIdle, type DurablesIdleOptions } from './durables-idle.js';
export {
  countStorageOps,
  connectCountingClient,
  commandCollection,
  NON_STORAGE_COMMANDS,
  type StorageOpCount,
  type StorageOpsCounter,
  type StorageOpsReport,
} from './storage-ops.js';
