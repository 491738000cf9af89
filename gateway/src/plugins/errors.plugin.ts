import { status } from '@grpc/grpc-js';
import { describeGrpcError, isServiceError, type DomainError } from '@mailfleet/kit';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

/**
 * The error body forms of SPEC.md section 7, chosen per endpoint family with
 * the route option `config.errorForm`:
 *  - code:    {code, message}             contact books, templates, webhooks, most others
 *  - nested:  {error: {code, message}}    contacts
 *  - string:  {error: message}            domains
 *  - success: {success: false, error}     suppression delete
 */
export type RateLimitFamilyName = 'SEND_EMAIL' | 'BATCH_EMAIL' | 'READ_EMAIL' | 'FEEDBACK_LIST' | 'CONTACT' | 'BULK_CONTACT' | 'DEFAULT';

export type ErrorForm = 'code' | 'nested' | 'string' | 'success';

declare module 'fastify' {
  interface FastifyContextConfig {
    errorForm?: ErrorForm;
    /** Public routes skip bearer authentication (health, version, docs, tracking links). */
    public?: boolean;
    /** Set on the two send routes: SENDING keys may call them. Every other route needs a FULL key. */
    allowSendingKeys?: boolean;
    /** Rate-limit family (SPEC section 8) and the units a request costs; default family DEFAULT, cost 1. */
    rateLimit?: { family: RateLimitFamilyName; cost?: (request: FastifyRequest) => number };
  }
}

export interface HttpError {
  statusCode: number;
  code: string;
  message: string;
  details?: Readonly<Record<string, unknown>> | undefined;
}

const GRPC_TO_HTTP: Partial<Record<status, number>> = {
  [status.INVALID_ARGUMENT]: 400,
  [status.FAILED_PRECONDITION]: 400,
  [status.OUT_OF_RANGE]: 400,
  [status.UNAUTHENTICATED]: 401,
  [status.PERMISSION_DENIED]: 403,
  [status.NOT_FOUND]: 404,
  [status.ALREADY_EXISTS]: 409,
  [status.ABORTED]: 409,
  [status.RESOURCE_EXHAUSTED]: 429,
  [status.UNAVAILABLE]: 503,
  [status.DEADLINE_EXCEEDED]: 504,
  [status.CANCELLED]: 499,
};

const DEFAULT_CODE: Record<number, string> = {
  400: 'BAD_REQUEST', 401: 'UNAUTHORIZED', 403: 'FORBIDDEN', 404: 'NOT_FOUND', 409: 'NOT_UNIQUE', 413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE', 429: 'RATE_LIMITED', 499: 'CANCELLED', 503: 'SERVICE_UNAVAILABLE', 504: 'GATEWAY_TIMEOUT',
};

/** Thrown by gateway code for errors it decides itself (auth, permissions, its own validation). */
export class GatewayError extends Error implements HttpError {
  constructor(public readonly statusCode: number, message: string, public readonly code: string = DEFAULT_CODE[statusCode] ?? 'ERROR', public readonly details?: Readonly<Record<string, unknown>>) {
    super(message);
  }
}

/** One mapping from anything thrown to the HTTP status and message; 5xx internals are hidden. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof GatewayError) return err;
  if (isServiceError(err)) {
    const info = describeGrpcError(err);
    const statusCode = GRPC_TO_HTTP[info.grpcCode] ?? 500;
    if (statusCode >= 500 && statusCode !== 503 && statusCode !== 504) return internal();
    if (statusCode === 503) return { statusCode, code: 'SERVICE_UNAVAILABLE', message: 'A backing service is unavailable; retry shortly' };
    if (statusCode === 504) return { statusCode, code: 'GATEWAY_TIMEOUT', message: 'A backing service did not answer in time; retry shortly' };
    return { statusCode, code: info.appCode || DEFAULT_CODE[statusCode] || 'ERROR', message: info.message, details: info.details };
  }
  const fe = err as FastifyError & { validation?: unknown[]; validationContext?: string };
  if (fe && Array.isArray(fe.validation)) {
    return { statusCode: 400, code: 'BAD_REQUEST', message: fe.message, details: { issues: fe.validation } };
  }
  if (fe && typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return { statusCode: fe.statusCode, code: DEFAULT_CODE[fe.statusCode] ?? 'BAD_REQUEST', message: fe.message };
  }
  if (err && typeof err === 'object' && 'grpcCode' in err) {
    const de = err as DomainError;
    const statusCode = GRPC_TO_HTTP[de.grpcCode] ?? 500;
    if (statusCode < 500) return { statusCode, code: de.code, message: de.message, details: de.details };
  }
  return internal();
}

function internal(): HttpError {
  return { statusCode: 500, code: 'INTERNAL_SERVER_ERROR', message: 'Internal server error' };
}

export function errorBody(form: ErrorForm, e: Pick<HttpError, 'code' | 'message' | 'details'>): Record<string, unknown> {
  switch (form) {
    case 'nested':
      return { error: { code: e.code, message: e.message } };
    case 'string':
      return { error: e.message };
    case 'success':
      return { success: false, error: e.message };
    case 'code':
    default:
      return e.details && e.code === 'BAD_REQUEST' ? { code: e.code, message: e.message, details: e.details } : { code: e.code, message: e.message };
  }
}

export function sendError(request: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
  const e = toHttpError(err);
  if (e.statusCode >= 500) request.log.error({ err }, 'request failed');
  else request.log.debug({ code: e.code, message: e.message }, 'request rejected');
  const form = request.routeOptions.config?.errorForm ?? 'code';
  return reply.code(e.statusCode).send(errorBody(form, e));
}

export const errorsPlugin = fp(async (app: FastifyInstance) => {
  app.setErrorHandler((err, request, reply) => sendError(request, reply, err));
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(errorBody('code', { code: 'NOT_FOUND', message: `Route ${request.method} ${request.url.split('?')[0]} not found` })));
}, { name: 'errors' });
