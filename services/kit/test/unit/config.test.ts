import { describe, expect, it } from 'vitest';
import { ConfigError, address, bool, int, loadConfig, oneOf, port, secret, str, url } from '../../src/config.js';

const spec = {
  grpcPort: port('GRPC_PORT', 50051),
  mongoUrl: url('MONGO_URL', ['mongodb']),
  level: oneOf('LOG_LEVEL', ['info', 'debug'] as const, 'info'),
  flag: bool('FLAG', false),
  upstream: address('AUTH_GRPC_ADDR', '127.0.0.1:50051'),
  key: secret('KEY_SECRET'),
  name: str('NAME', 'x'),
  n: int('N', 3, 1, 10),
};

describe('loadConfig', () => {
  it('applies defaults and parses values', () => {
    const c = loadConfig(spec, { MONGO_URL: 'mongodb://h:1', KEY_SECRET: 'a'.repeat(16), FLAG: 'true', N: '7' });
    expect(c).toEqual({ grpcPort: 50051, mongoUrl: 'mongodb://h:1', level: 'info', flag: true, upstream: '127.0.0.1:50051', key: 'a'.repeat(16), name: 'x', n: 7 });
  });

  it('reports every problem at once, never the value of a secret', () => {
    let err: unknown;
    try {
      loadConfig(spec, { GRPC_PORT: '70000', LOG_LEVEL: 'loud', FLAG: 'maybe', AUTH_GRPC_ADDR: 'nohost', KEY_SECRET: 'short-secret', N: '11' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const problems = (err as ConfigError).problems;
    expect(problems).toHaveLength(7);
    expect(problems.join('\n')).toContain('MONGO_URL is required');
    expect(problems.join('\n')).toContain('GRPC_PORT="70000": must be between 0 and 65535');
    expect(problems.join('\n')).toContain('LOG_LEVEL="loud"');
    expect(problems.join('\n')).toContain('KEY_SECRET=<redacted>');
    expect(problems.join('\n')).not.toContain('short-secret');
  });

  it('rejects a URL of the wrong scheme', () => {
    expect(() => loadConfig({ u: url('U', ['mongodb']) }, { U: 'http://x' })).toThrow(/must use mongodb/);
  });
});
