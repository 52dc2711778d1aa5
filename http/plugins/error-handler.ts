import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { errorCodes, isServiceError, type ErrorCode } from '../../runtime/index.js';

/**
 * Every error leaves as the conventions' body:
 * {statusCode, code, error, message, details?}. Bad input is always a 4xx;
 * a 500 means a defect and is logged with its stack.
 */
const reasonPhrases: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export function sendError(reply: FastifyReply, code: ErrorCode, message: string, extra: { details?: unknown; retryAfterSeconds?: number } = {}): FastifyReply {
  const statusCode = errorCodes[code].status;
  if (extra.retryAfterSeconds !== undefined) reply.header('retry-after', String(extra.retryAfterSeconds));
  const body: Record<string, unknown> = { statusCode, code, error: reasonPhrases[statusCode] ?? 'Error', message };
  if (extra.details !== undefined) body.details = extra.details;
  return reply.code(statusCode).type('application/json; charset=utf-8').send(JSON.stringify(body));
}

/** Fastify's own client-error codes, mapped onto ours. */
function codeForFastifyError(error: FastifyError): ErrorCode | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return 'payload_too_large';
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return error.statusCode === 415 ? 'unsupported_media_type' : 'BAD_REQUEST';
    default:
      break;
  }
  const status = error.statusCode ?? 0;
  if (status === 413) return 'payload_too_large';
  if (status === 415) return 'unsupported_media_type';
  if (status === 404) return 'not_found';
  if (status === 429) return 'rate_limited';
  if (status >= 400 && status < 500) return 'BAD_REQUEST';
  // JSON.parse failures and prototype-poisoning rejections carry no status.
  if (error instanceof SyntaxError) return 'BAD_REQUEST';
  return undefined;
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (isServiceError(error)) {
      if (error.statusCode >= 500 && error.code === 'internal_error') request.log.error({ err: error }, 'internal error');
      return sendError(reply, error.code, error.message, { details: error.details, retryAfterSeconds: error.retryAfterSeconds });
    }
    if (error.validation) {
      const details = error.validation.map((issue) => ({
        field: fieldOf(error.validationContext, issue.instancePath, issue.params as Record<string, unknown>),
        message: issue.message ?? 'is invalid',
      }));
      const first = details[0];
      return sendError(reply, 'BAD_REQUEST', first ? `${first.field} ${first.message}` : 'Invalid request', { details });
    }
    const code = codeForFastifyError(error);
    if (code) return sendError(reply, code, error.message || errorCodes[code].description);
    request.log.error({ err: error }, 'unhandled error');
    return sendError(reply, 'internal_error', 'Internal server error');
  });

  app.setNotFoundHandler((request, reply) => sendError(reply, 'not_found', `Route ${request.method} ${request.url.split('?')[0]} not found`));
}

function fieldOf(context: string | undefined, instancePath: string, params: Record<string, unknown>): string {
  let path = instancePath.replace(/^\//, '').replace(/\//g, '.');
  if (typeof params.missingProperty === 'string') path = path ? `${path}.${params.missingProperty}` : params.missingProperty;
  if (typeof params.additionalProperty === 'string') path = path ? `${path}.${params.additionalProperty}` : params.additionalProperty;
  return path ? `${context ?? 'body'}.${path}` : (context ?? 'body');
}
