import { Metadata, status, type ServiceError } from '@grpc/grpc-js';

/**
 * Domain errors: thrown by domain and repository code, turned into gRPC status
 * codes by one mapper (toGrpcError) and back into typed errors on the client
 * side (fromGrpcError). An `appCode` travels in metadata so the gateway can put
 * the right `code` in the error body (for example NOT_UNIQUE) without parsing
 * messages.
 */
export type ErrorDetails = Readonly<Record<string, unknown>>;

export abstract class DomainError extends Error {
  abstract readonly grpcCode: status;
  abstract readonly defaultAppCode: string;
  readonly appCode: string;

  constructor(message: string, opts: { appCode?: string; details?: ErrorDetails; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.appCode = opts.appCode ?? '';
    this.details = opts.details;
  }

  readonly details: ErrorDetails | undefined;

  get code(): string {
    return this.appCode || this.defaultAppCode;
  }
}

export class InvalidArgumentError extends DomainError {
  readonly grpcCode = status.INVALID_ARGUMENT;
  readonly defaultAppCode = 'BAD_REQUEST';
}
export class NotFoundError extends DomainError {
  readonly grpcCode = status.NOT_FOUND;
  readonly defaultAppCode = 'NOT_FOUND';
}
export class AlreadyExistsError extends DomainError {
  readonly grpcCode = status.ALREADY_EXISTS;
  readonly defaultAppCode = 'NOT_UNIQUE';
}
/** A conflicting concurrent operation (for example an idempotency key still in flight). */
export class ConflictError extends DomainError {
  readonly grpcCode = status.ABORTED;
  readonly defaultAppCode = 'CONFLICT';
}
export class PermissionDeniedError extends DomainError {
  readonly grpcCode = status.PERMISSION_DENIED;
  readonly defaultAppCode = 'FORBIDDEN';
}
export class UnauthenticatedError extends DomainError {
  readonly grpcCode = status.UNAUTHENTICATED;
  readonly defaultAppCode = 'UNAUTHORIZED';
}
export class FailedPreconditionError extends DomainError {
  readonly grpcCode = status.FAILED_PRECONDITION;
  readonly defaultAppCode = 'BAD_REQUEST';
}
export class ResourceExhaustedError extends DomainError {
  readonly grpcCode = status.RESOURCE_EXHAUSTED;
  readonly defaultAppCode = 'RATE_LIMITED';
}
export class UnavailableError extends DomainError {
  readonly grpcCode = status.UNAVAILABLE;
  readonly defaultAppCode = 'UNAVAILABLE';
}
export class InternalError extends DomainError {
  readonly grpcCode = status.INTERNAL;
  readonly defaultAppCode = 'INTERNAL_SERVER_ERROR';
}

export const APP_CODE_KEY = 'mailfleet-error-code';
export const DETAILS_KEY = 'mailfleet-error-details-bin';

/** Codes that describe the caller's request, not the health of the callee: they never trip a breaker. */
export const CLIENT_ERROR_CODES: ReadonlySet<status> = new Set([
  status.INVALID_ARGUMENT, status.NOT_FOUND, status.ALREADY_EXISTS, status.PERMISSION_DENIED,
  status.UNAUTHENTICATED, status.FAILED_PRECONDITION, status.ABORTED, status.OUT_OF_RANGE,
  status.RESOURCE_EXHAUSTED, status.CANCELLED,
  // The callee is up but lacks the method (a version skew during a rollout): not a health problem.
  status.UNIMPLEMENTED,
]);

export interface GrpcErrorLike {
  code: status;
  details: string;
  metadata: Metadata;
}

/**
 * The one mapper from anything thrown in a handler to a gRPC status. Unknown
 * errors become INTERNAL with a generic message: internals never leak.
 */
export function toGrpcError(err: unknown): GrpcErrorLike & { internal: boolean } {
  const metadata = new Metadata();
  if (err instanceof DomainError) {
    metadata.set(APP_CODE_KEY, err.code);
    if (err.details) metadata.set(DETAILS_KEY, Buffer.from(JSON.stringify(err.details)));
    return { code: err.grpcCode, details: err.message, metadata, internal: err.grpcCode === status.INTERNAL };
  }
  if (isServiceError(err)) {
    // An upstream's error passes through unchanged (its code and app code already mean something).
    return { code: err.code, details: err.details, metadata: err.metadata ?? metadata, internal: err.code === status.INTERNAL || err.code === status.UNKNOWN };
  }
  metadata.set(APP_CODE_KEY, 'INTERNAL_SERVER_ERROR');
  return { code: status.INTERNAL, details: 'internal error', metadata, internal: true };
}

export function isServiceError(err: unknown): err is ServiceError {
  return typeof err === 'object' && err !== null && 'code' in err && typeof (err as { code: unknown }).code === 'number' && 'details' in err && 'metadata' in err;
}

export interface RemoteErrorInfo {
  grpcCode: status;
  appCode: string;
  message: string;
  details: ErrorDetails | undefined;
}

/** Reads the status, app code and details out of a gRPC error from an upstream. */
export function describeGrpcError(err: ServiceError): RemoteErrorInfo {
  const appCode = err.metadata?.get(APP_CODE_KEY)[0];
  const rawDetails = err.metadata?.get(DETAILS_KEY)[0];
  let details: ErrorDetails | undefined;
  if (rawDetails instanceof Buffer) {
    try {
      details = JSON.parse(rawDetails.toString('utf8')) as ErrorDetails;
    } catch {
      details = undefined;
    }
  }
  return { grpcCode: err.code, appCode: typeof appCode === 'string' ? appCode : '', message: err.details, details };
}
