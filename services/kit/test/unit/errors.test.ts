import { Metadata, status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { isClientError } from '../../src/breaker.js';
import {
  AlreadyExistsError, APP_CODE_KEY, ConflictError, describeGrpcError, InvalidArgumentError, NotFoundError, toGrpcError,
} from '../../src/errors.js';

describe('toGrpcError', () => {
  it('maps domain errors to their status and app code, with details', () => {
    const m = toGrpcError(new InvalidArgumentError('to is required', { details: { field: 'to' } }));
    expect(m.code).toBe(status.INVALID_ARGUMENT);
    expect(m.details).toBe('to is required');
    expect(m.metadata.get(APP_CODE_KEY)).toEqual(['BAD_REQUEST']);
    const info = describeGrpcError({ ...new Error('x'), name: 'e', message: 'x', code: m.code, details: m.details, metadata: m.metadata });
    expect(info).toEqual({ grpcCode: status.INVALID_ARGUMENT, appCode: 'BAD_REQUEST', message: 'to is required', details: { field: 'to' } });
  });

  it('keeps a specific app code', () => {
    expect(toGrpcError(new ConflictError('in flight', { appCode: 'NOT_UNIQUE' })).metadata.get(APP_CODE_KEY)).toEqual(['NOT_UNIQUE']);
    expect(toGrpcError(new AlreadyExistsError('dup')).code).toBe(status.ALREADY_EXISTS);
    expect(toGrpcError(new NotFoundError('gone')).code).toBe(status.NOT_FOUND);
  });

  it('hides unknown errors behind INTERNAL', () => {
    const m = toGrpcError(new Error('connection string mongodb://user:pw@host'));
    expect(m.code).toBe(status.INTERNAL);
    expect(m.details).toBe('internal error');
    expect(m.internal).toBe(true);
  });

  it('passes an upstream gRPC error through', () => {
    const md = new Metadata();
    md.set(APP_CODE_KEY, 'NOT_FOUND');
    const m = toGrpcError(Object.assign(new Error('nf'), { code: status.NOT_FOUND, details: 'domain not found', metadata: md }));
    expect(m.code).toBe(status.NOT_FOUND);
    expect(m.details).toBe('domain not found');
  });
});

describe('isClientError (breaker filter)', () => {
  const err = (code: status) => Object.assign(new Error('e'), { code, details: 'e', metadata: new Metadata() });
  it('does not count request errors against the upstream', () => {
    for (const c of [status.NOT_FOUND, status.INVALID_ARGUMENT, status.ALREADY_EXISTS, status.PERMISSION_DENIED, status.ABORTED]) {
      expect(isClientError(err(c))).toBe(true);
    }
  });
  it('counts unavailability and faults', () => {
    for (const c of [status.UNAVAILABLE, status.DEADLINE_EXCEEDED, status.INTERNAL, status.UNKNOWN]) expect(isClientError(err(c))).toBe(false);
    expect(isClientError(new Error('socket hang up'))).toBe(false);
  });
});
