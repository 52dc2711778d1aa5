import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorCodes, isServiceError, type ErrorCode } from '../../runtime/index.js';
import { routeConfigOf } from '../route-config.js';
import { qualifiedDetails, validationDetails } from '../validation-details.js';

/**
 * The one error handler of the edge. Every error leaves as the conventions'
 * body {statusCode, code, error, message, details?} unless its route says
 * otherwise with `config.errorFormat`:
 * - `'oauth'`: RFC 6749 §5.2, `{error, error_description}` (the token endpoint);
 * - `'scim'`: RFC 7644 §3.12, `{schemas, status, scimType?, detail}` (/scim/v2).
 * A standard's codes are in the registry (runtime/errors.ts, `oauth_*` and
 * `scim_*`, each with the `wire` value it renders as; docs/errors.md).
 * Bad input is always a 4xx; a 500 means a defect and is logged with its stack.
 */
export type ErrorFormat = 'oauth' | 'scim';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The wire format of this route's errors (default: the conventions' body). */
    errorFormat?: ErrorFormat;
  }
}

function wireOf(code: ErrorCode): string | undefined {
  return (errorCodes[code] as { wire?: string }).wire;
}

/** The conventions' error body of a code: {statusCode, code, error (the reason phrase), message, details?}. */
export function errorBodyOf(code: ErrorCode, message: string, details?: unknown): Record<string, unknown> {
  const statusCode = errorCodes[code].status;
  const body: Record<string, unknown> = { statusCode, code, error: STATUS_CODES[statusCode] ?? 'Error', message };
  if (details !== undefined) body.details = details;
  return body;
}

export function sendError(reply: FastifyReply, code: ErrorCode, message: string, extra: { details?: unknown; retryAfterSeconds?: number } = {}): FastifyReply {
  if (extra.retryAfterSeconds !== undefined) reply.header('retry-after', String(extra.retryAfterSeconds));
  return reply.code(errorCodes[code].status).type('application/json; charset=utf-8').send(JSON.stringify(errorBodyOf(code, message, extra.details)));
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

function renderConventions(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (isServiceError(error)) {
    if (error.statusCode >= 500 && error.code === 'internal_error') request.log.error({ err: error }, 'internal error');
    const details = qualifiedDetails(error.details, request);
    return sendError(reply, error.code, error.message, { details, retryAfterSeconds: error.retryAfterSeconds });
  }
  if (error.validation) {
    const details = validationDetails(error.validationContext, error.validation);
    const first = details[0];
    return sendError(reply, 'BAD_REQUEST', first ? `${first.field} ${first.message}` : 'Invalid request', { details });
  }
  const code = codeForFastifyError(error);
  if (code) return sendError(reply, code, error.message || errorCodes[code].description);
  request.log.error({ err: error }, 'unhandled error');
  return sendError(reply, 'internal_error', 'Internal server error');
}

// --- OAuth 2.0 (RFC 6749 §5.2) ------------------------------------------------

function renderOAuth(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const oauthWire = isServiceError(error) && error.code.startsWith('oauth_') ? wireOf(error.code) : undefined;
  if (isServiceError(error) && oauthWire !== undefined) {
    if (error.statusCode === 401) reply.header('www-authenticate', 'Basic realm="oauth"');
    return reply.code(error.statusCode).header('cache-control', 'no-store').send({ error: oauthWire, error_description: error.message });
  }
  const status = error.statusCode ?? 500;
  if (isServiceError(error) && error.retryAfterSeconds !== undefined) reply.header('retry-after', String(error.retryAfterSeconds));
  if (status === 429 || status === 503) {
    return reply.code(status).send({ error: wireOf('oauth_temporarily_unavailable'), error_description: error.message });
  }
  if (status >= 500) {
    request.log.error({ err: error }, 'token endpoint failed');
    return reply.code(500).send({ error: wireOf('oauth_server_error'), error_description: 'Internal error.' });
  }
  if (isServiceError(error)) return reply.code(400).send({ error: wireOf('oauth_invalid_request'), error_description: error.message });
  // Fastify's own: wrong content type, body too large, validation.
  return reply.code(status === 413 ? 413 : 400).send({ error: wireOf('oauth_invalid_request'), error_description: error.message });
}

// --- SCIM 2.0 (RFC 7644 §3.12) --------------------------------------------------

const SCIM_ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';
export const SCIM_CONTENT_TYPE = 'application/scim+json; charset=utf-8';
const SCIM_STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 401: 'Unauthorized', 404: 'Not Found', 409: 'Conflict' };

/** A SCIM error body, sent as is (for answers a route decides itself, e.g. an unknown resource type). */
export function sendScimError(reply: FastifyReply, status: number, detail: string, scimType?: string): FastifyReply {
  const body: Record<string, unknown> = { schemas: [SCIM_ERROR_SCHEMA], status: String(status) };
  if (scimType) body.scimType = scimType;
  body.detail = detail || SCIM_STATUS_TEXT[status] || 'Error';
  if (status === 401) reply.header('www-authenticate', 'Bearer realm="scim"');
  return reply.code(status).type(SCIM_CONTENT_TYPE).send(JSON.stringify(body));
}

function renderScim(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (isServiceError(error)) {
    const scimType = error.code.startsWith('scim_') ? wireOf(error.code) : error.code === 'BAD_REQUEST' ? wireOf('scim_invalid_value') : undefined;
    if (error.statusCode >= 500 && error.code === 'internal_error') request.log.error({ err: error }, 'internal error');
    if ((error.statusCode >= 500 || error.statusCode === 429) && error.retryAfterSeconds !== undefined) reply.header('retry-after', String(error.retryAfterSeconds));
    return sendScimError(reply, error.statusCode, error.message, scimType);
  }
  if (error.validation) {
    const issue = error.validation[0];
    const where = `${error.validationContext ?? 'body'}${issue?.instancePath ? issue.instancePath.replace(/\//g, '.') : ''}`;
    return sendScimError(reply, 400, `${where} ${issue?.message ?? 'is invalid'}`, wireOf(error.validationContext === 'body' ? 'scim_invalid_syntax' : 'scim_invalid_value'));
  }
  const status = error.statusCode ?? 0;
  if (error instanceof SyntaxError || (status >= 400 && status < 500)) {
    return sendScimError(reply, status >= 400 && status < 500 ? status : 400, error.message, status === 400 || error instanceof SyntaxError ? wireOf('scim_invalid_syntax') : undefined);
  }
  request.log.error({ err: error }, 'unhandled error');
  return sendScimError(reply, 500, 'Internal server error');
}

const renderers: Record<ErrorFormat, typeof renderConventions> = { oauth: renderOAuth, scim: renderScim };

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const format = routeConfigOf(request)?.errorFormat;
    return (format ? renderers[format] : renderConventions)(error, request, reply);
  });

  app.setNotFoundHandler((request, reply) => sendError(reply, 'not_found', `Route ${request.method} ${request.url.split('?')[0]} not found`));
}

/** Routes registered in `scope` answer errors in `format` (set on each route's config). */
export function useErrorFormat(scope: FastifyInstance, format: ErrorFormat): void {
  scope.addHook('onRoute', (route) => {
    route.config = { ...(route.config ?? {}), errorFormat: format };
  });
}

