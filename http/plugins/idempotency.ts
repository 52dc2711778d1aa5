import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorCodes, ServiceError } from '../../runtime/index.js';
import { IDEMPOTENCY_KIND, type BeginReply, type StoredResponse } from '../../actors/idempotency/state.js';
import type { AppServices } from '../services.js';
import { routeConfigOf } from '../route-config.js';
import { errorBodyOf } from './error-handler.js';
import { responseHoldsSecret } from '../secret-responses.js';

/**
 * `Idempotency-Key` on authenticated POSTs: the first request runs, retries
 * get its stored response (marked `Idempotent-Replayed: true`). Scoped to
 * the caller's tenant and user: members of one organization share a tenant,
 * and one member's key must not replay another's answer (nor stop the other's
 * request from running). The stored response is committed before the first
 * response leaves, so a retry can never run the request a second time.
 * 5xx, 402 and 429 responses are not stored: the request may be retried.
 */
/** Answers a retry under the same key must not replay: the request did not run (payment required, rate limited). */
const RETRY_STATUSES = new Set([402, 429]);

/** An Idempotency-Key: 1 to 255 visible ASCII characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

interface IdempotencyContext {
  actorKey: string;
  fingerprint: string;
  replayed: boolean;
  secretResponse: boolean;
}

/** What a replay of a request whose answer carried a secret gets: the fact that it ran, not the answer. */
function withheldResponse(status_code: number): StoredResponse {
  const message = `The request with this Idempotency-Key already ran (${status_code}). Its answer carried a secret shown only once, which is not stored: look the created resource up, or revoke it and create another.`;
  return {
    status_code: errorCodes.idempotency_replay_withheld.status,
    content_type: 'application/json; charset=utf-8',
    body: JSON.stringify(errorBodyOf('idempotency_replay_withheld', message)),
  };
}

declare module 'fastify' {
  interface FastifyRequest {
    idempotency: IdempotencyContext | null;
  }
  interface FastifyContextConfig {
    /** The route applies the Idempotency-Key itself (talent XP events answer a replay with idempotent: true): this store stays out. */
    idempotencyInHandler?: boolean;
    /**
     * A 2xx answer of this route carries a secret shown once: the store keeps
     * only that the request ran, and a replay answers 409
     * idempotency_replay_withheld. Set at registration from the response
     * schema (http/secret-responses.ts), or by the route itself.
     */
    secretResponse?: boolean;
  }
}

function fingerprintOf(request: FastifyRequest): string {
  return createHash('sha256')
    .update(`${request.method} ${request.url}\n`)
    .update(JSON.stringify(request.body ?? null))
    .digest('base64url');
}

export function registerIdempotency(app: FastifyInstance, services: AppServices): void {
  app.decorateRequest('idempotency', null);
  app.addHook('onRoute', (route) => {
    if (route.config?.secretResponse === undefined && responseHoldsSecret(route.schema?.response)) route.config = { ...route.config, secretResponse: true };
  });

  // Both hooks run on every request: a plain callback with an early exit costs
  // nothing when there is no Idempotency-Key; the work happens only when there is.
  async function begin(request: FastifyRequest, reply: FastifyReply, header: unknown): Promise<void> {
    if (typeof header !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(header)) {
      throw new ServiceError('BAD_REQUEST', 'Idempotency-Key must be 1 to 255 visible ASCII characters.');
    }
    const context: IdempotencyContext = {
      actorKey: JSON.stringify([request.principal!.tenant, request.principal!.user_id, header]),
      fingerprint: fingerprintOf(request),
      replayed: false,
      secretResponse: routeConfigOf(request)?.secretResponse === true,
    };
    const outcome = await services.actors.ask<BeginReply>(IDEMPOTENCY_KIND, context.actorKey, { op: 'begin', fingerprint: context.fingerprint });
    request.idempotency = context;
    if (outcome.outcome === 'replay') {
      context.replayed = true;
      reply
        .code(outcome.response.status_code)
        .header('idempotent-replayed', 'true')
        .type(outcome.response.content_type)
        .send(outcome.response.body);
    }
  }

  async function finish(context: IdempotencyContext, reply: FastifyReply, payload: unknown): Promise<unknown> {
    // Not stored, so the same key runs the request when retried: a 5xx (it may not have run), and the answers
    // that say it did not run and how to get it to: 402 (pay, then retry: x402) and 429 (wait, then retry).
    if (reply.statusCode >= 500 || RETRY_STATUSES.has(reply.statusCode) || (payload !== null && payload !== undefined && typeof payload !== 'string')) {
      await services.actors.ask(IDEMPOTENCY_KIND, context.actorKey, { op: 'abort', fingerprint: context.fingerprint });
      return payload;
    }
    const contentType = String(reply.getHeader('content-type') ?? 'application/json; charset=utf-8');
    await services.actors.ask(IDEMPOTENCY_KIND, context.actorKey, {
      op: 'complete',
      fingerprint: context.fingerprint,
      response:
        context.secretResponse && reply.statusCode < 300
          ? withheldResponse(reply.statusCode)
          : { status_code: reply.statusCode, content_type: contentType, body: (payload as string | null) ?? '' },
    });
    return payload;
  }

  app.addHook('preHandler', (request, reply, done) => {
    const header = request.headers['idempotency-key'];
    if (request.method !== 'POST' || !request.principal || header === undefined || routeConfigOf(request)?.idempotencyInHandler === true) {
      done();
      return;
    }
    // A replay answers from the hook: then the chain stops and done is not called.
    begin(request, reply, header).then(() => {
      if (!reply.sent) done();
    }, done);
  });

  app.addHook('onSend', (request, reply, payload, done) => {
    const context = request.idempotency;
    if (!context || context.replayed) {
      done(null, payload);
      return;
    }
    request.idempotency = null;
    finish(context, reply, payload).then((result) => done(null, result), done);
  });
}
