// The server moved to @mailfleet/deploy: local mode (`npm start`) runs it too, and runtime code
// must not import the test kit. Tests keep importing it from here.
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
} from '@mailfleet/deploy';
