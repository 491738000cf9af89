import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';

interface HealthCheckResponse {
  status: string;
}
interface HealthClient extends grpc.Client {
  Check(
    request: { service: string },
    options: grpc.CallOptions,
    callback: (error: grpc.ServiceError | null, response?: HealthCheckResponse) => void,
  ): grpc.ClientUnaryCall;
}

const HealthClientCtor = grpc.makeGenericClientConstructor(healthService, 'Health') as unknown as new (
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ChannelOptions,
) => HealthClient;

// A probe polls a server that is still starting: the default reconnect backoff
// (1 s growing to 2 min) would notice it long after it is up.
const PROBE_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 500,
};

/** A grpc.health.v1 client for one address (`host:port`). */
export interface HealthProbe {
  /** 'SERVING', 'NOT_SERVING', 'UNKNOWN', or a description of why the call failed. */
  check(service?: string, timeoutMs?: number): Promise<string>;
  close(): void;
}

export function createHealthProbe(address: string): HealthProbe {
  const client = new HealthClientCtor(address, grpc.credentials.createInsecure(), PROBE_CHANNEL_OPTIONS);
  return {
    check(service = '', timeoutMs = 1000) {
      return new Promise((resolve) => {
        client.Check({ service }, { deadline: Date.now() + timeoutMs }, (error, response) => {
          if (error) resolve(`${grpc.status[error.code] ?? error.code}: ${error.details || error.message}`);
          else resolve(response?.status ?? 'UNKNOWN');
        });
      });
    },
    close() {
      client.close();
    },
  };
}

/** GET url; 'OK' on a 2xx, otherwise what went wrong. */
export async function probeHttp(url: string, timeoutMs = 1000): Promise<string> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const body = await res.text();
    return res.ok ? 'OK' : `HTTP ${res.status}: ${body.slice(0, 200)}`;
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    return cause?.code ?? (error as Error).message;
  }
}
