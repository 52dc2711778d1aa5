import client from 'prom-client';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  X402_BALANCE_KIND,
  formatUsd,
  isExemptPath,
  pricedPath,
  routedSegments,
  resolvePrice,
  x402BalanceKey,
  type ChargeReply,
  type ResolvedPrice,
} from '../../actors/x402/messages.js';
import { bearerAuthentication } from './authenticate.js';
import { IDEMPOTENCY_KEY_PATTERN } from './idempotency.js';
import { publicBase } from '../public-base.js';
import type { AppServices } from '../services.js';
import { x402Edge, type X402Edge } from '../x402-edge.js';
import {
  decodePaymentProof,
  matchingRequirement,
  paymentRequiredBody,
  paymentRequiredHeaderV2,
  paymentResponseHeader,
  requirementsV1,
  requirementsV2,
  type PaymentProof,
  type PricedResource,
} from '../x402-protocol.js';
import { PRICED_ROUTE } from '../x402-session.js';
import { routeUrlOf } from '../route-config.js';
import { randomId } from '../../runtime/index.js';

/**
 * x402 enforcement at the edge (docs/api/x402.md, "Enforcement"). With
 * X402_ENABLED off (the default) it registers no request hook at all: it only
 * notes the routes for the catalog.
 *
 * On: each request's route template (Fastify's routeOptions.url) and method
 * are priced from the cached rules (onRequest). A priced request, once its
 * route has authenticated it (preHandler), pays one of two ways:
 * - an x402 proof (`X-PAYMENT`, or v2's `PAYMENT-SIGNATURE`): verified by
 *   the facilitator; settled before the handler (`settle_before`) or after it
 *   answered below 500 (`verify_then_settle_after`, the default). A failed
 *   settlement turns the answer into a 402; a 5xx answer is never settled.
 * - a prepaid balance: the bearer's tenant is charged in one turn of its
 *   balance actor (never below zero), under a charge id that is the
 *   request's Idempotency-Key when it has one (so a retry is not charged
 *   twice), else an id made for the request (chargeIdOf). A 5xx answer refunds it (a message naming
 *   the charge id and attempt: applied once); otherwise a held charge is
 *   settled, and one the edge never reports on is refunded after 5 minutes.
 * Neither: 402 with the x402 body (x402Version 1, error, accepts) and the v2
 * requirements in the PAYMENT-REQUIRED header.
 */
interface PaymentState {
  price: ResolvedPrice;
  priced: PricedResource;
  proof?: { proof: PaymentProof; requirement: unknown; settled: boolean };
  charge?: { principal: string; charge_id: string; attempt: number; hold: boolean };
}

declare module 'fastify' {
  interface FastifyRequest {
    x402Payment: PaymentState | null;
  }
}

/**
 * A POST retried under the same Idempotency-Key (scoped, like the idempotency
 * store, to the caller's user) is charged once: its retry is answered from the
 * store, so no new work is done. Only a POST: on any other method the key
 * replays nothing (docs/api/common.md), every request is new work, and
 * charging it once would make every later request with that key free.
 */
function chargeIdOf(request: FastifyRequest): string {
  const key = request.headers['idempotency-key'];
  // Only when the idempotency store took the request (request.idempotency): its retry is then answered from the
  // store. A route it does not cover (no bearer when it looked, or one that keeps its own keys) runs anew each
  // time, and one charge per key would make every run after the first free.
  if (request.idempotency !== null && request.method === 'POST' && typeof key === 'string' && IDEMPOTENCY_KEY_PATTERN.test(key)) {
    return `idem ${request.principal?.user_id ?? ''} POST ${request.url} ${key}`;
  }
  // Not request.id: a client's X-Request-Id becomes the request id, and one reused would make every
  // request after the first a duplicate of a charge already paid, served for nothing.
  return `req ${randomId()}`;
}

function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function paymentRequired(edge: X402Edge, reply: FastifyReply, state: PaymentState, error: string): FastifyReply {
  const v2 = requirementsV2(edge.settings, state.priced);
  return reply
    .code(402)
    .header('payment-required', paymentRequiredHeaderV2(error, state.priced, v2))
    .type('application/json; charset=utf-8')
    .send(paymentRequiredBody(error, requirementsV1(edge.settings, state.priced)));
}

export function registerX402(app: FastifyInstance, services: AppServices): void {
  const edge = x402Edge(services);
  app.decorateRequest('x402Payment', null);
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const summary = typeof route.schema?.summary === 'string' ? route.schema.summary : '';
    for (const method of methods) edge.noteRoute(String(method).toUpperCase(), route.url, summary);
  });
  if (!edge.enabled) return;

  const payments = new client.Counter({
    name: 'x402_payments_total',
    help: 'Priced requests by how they ended: paid from a balance or a proof, refunded, or refused with 402.',
    labelNames: ['outcome'],
    registers: [services.metrics.registry],
  });
  const authenticate = bearerAuthentication(services);

  app.addHook('onRequest', async (request) => {
    const url = routeUrlOf(request);
    if (url === undefined || isExemptPath(url)) return;
    const method = request.method === 'HEAD' ? 'GET' : request.method;
    const path = pricedPath(request.url);
    // Priced by the concrete path as the router read it (its template, the parameters it decoded): a rule's
    // `:param` covers any segment of it, a rule naming one resource (`/api/v1/things/premium`) applies to that
    // resource, as the quote says it does, and `/things/%70remium` or a segment reading `*` is no way around it.
    const price = resolvePrice(await edge.rules(), method, routedSegments(url, request.params as Record<string, unknown>));
    if (!price.payable) return;
    request.x402Payment = {
      price,
      priced: {
        amount_atomic: price.amount_atomic,
        resource: publicBase(request) + path,
        description: price.rule!.description || `${method} ${url}`,
        method,
        discoverable: price.rule!.discoverable,
      },
    };
    // A payment session token is accepted here (http/x402-session.ts).
    (request as unknown as Record<symbol, unknown>)[PRICED_ROUTE] = true;
  });

  app.addHook('preHandler', async (request, reply) => {
    const state = request.x402Payment;
    if (!state) return;
    const proofHeader = headerOf(request, 'payment-signature') ?? headerOf(request, 'x-payment');
    if (proofHeader !== undefined) return payWithProof(request, reply, state, proofHeader);

    if (!request.principal && request.headers.authorization !== undefined) await authenticate(request, reply);
    const principal = request.principal;
    if (!principal) {
      payments.inc({ outcome: 'refused' });
      return paymentRequired(edge, reply, state, 'X-PAYMENT header is required (or a bearer token of a principal with a prepaid balance)');
    }
    const hold = state.price.settle_mode === 'verify_then_settle_after';
    const answer = await services.actors.ask<ChargeReply>(X402_BALANCE_KIND, x402BalanceKey(principal.tenant), {
      op: 'charge',
      charge_id: chargeIdOf(request),
      amount_atomic: state.price.amount_atomic,
      settle: hold ? 'hold' : 'final',
    });
    if (answer.outcome === 'insufficient') {
      payments.inc({ outcome: 'refused' });
      return paymentRequired(
        edge,
        reply,
        state,
        `Insufficient prepaid balance: ${formatUsd(answer.balance_atomic)} USD, this request costs ${formatUsd(state.price.amount_atomic)} USD; top up or send X-PAYMENT`,
      );
    }
    reply.header('x402-balance-usd', formatUsd(answer.balance_atomic));
    // A duplicate (the same Idempotency-Key) was paid by its first request, which settles or refunds it.
    if (answer.outcome === 'charged') {
      state.charge = { principal: principal.tenant, charge_id: answer.charge_id, attempt: answer.attempt, hold };
      reply.header('x402-charged-usd', formatUsd(state.price.amount_atomic));
    }
    payments.inc({ outcome: answer.outcome === 'charged' ? 'balance' : 'balance_duplicate' });
  });

  async function payWithProof(request: FastifyRequest, reply: FastifyReply, state: PaymentState, header: string): Promise<FastifyReply | undefined> {
    const refuse = (error: string) => {
      payments.inc({ outcome: 'refused' });
      return paymentRequired(edge, reply, state, error);
    };
    if (!edge.facilitator) return refuse('This server has no x402 facilitator configured: pay from a prepaid balance instead of X-PAYMENT');
    const proof = decodePaymentProof(header);
    if (!proof) return refuse('The payment header is not a base64 JSON x402 PaymentPayload');
    const requirement =
      proof.version === 1 ? matchingRequirement(proof, requirementsV1(edge.settings, state.priced)) : matchingRequirement(proof, requirementsV2(edge.settings, state.priced));
    if (!requirement) return refuse(`No payment requirement of this route matches scheme ${proof.scheme} on network ${proof.network}`);
    const verified = await edge.facilitator.verify(proof.version, proof.payload, requirement);
    if (!verified.isValid) return refuse(`The payment was refused by the facilitator: ${verified.invalidReason ?? 'invalid'}`);
    state.proof = { proof, requirement, settled: false };
    if (state.price.settle_mode === 'settle_before') {
      const settled = await edge.facilitator.settle(proof.version, proof.payload, requirement);
      if (!settled.success) return refuse(`The payment could not be settled: ${settled.errorReason ?? 'unknown reason'}`);
      state.proof.settled = true;
      reply.header(proof.version === 1 ? 'x-payment-response' : 'payment-response', paymentResponseHeader({ ...settled, payer: settled.payer ?? verified.payer ?? '' }));
      payments.inc({ outcome: 'proof' });
    }
    return undefined;
  }

  // verify_then_settle_after with a proof: settle once the handler answered below 500, before the answer leaves.
  app.addHook('onSend', async (request, reply, payload) => {
    const proof = request.x402Payment?.proof;
    if (!proof || proof.settled || reply.statusCode >= 500 || reply.statusCode === 402) return payload;
    proof.settled = true;
    const state = request.x402Payment!;
    try {
      const settled = await edge.facilitator!.settle(proof.proof.version, proof.proof.payload, proof.requirement);
      if (settled.success) {
        reply.header(proof.proof.version === 1 ? 'x-payment-response' : 'payment-response', paymentResponseHeader({ ...settled, payer: settled.payer ?? '' }));
        payments.inc({ outcome: 'proof' });
        return payload;
      }
      payments.inc({ outcome: 'refused' });
      const error = `The payment could not be settled: ${settled.errorReason ?? 'unknown reason'}`;
      reply.code(402).header('payment-required', paymentRequiredHeaderV2(error, state.priced, requirementsV2(edge.settings, state.priced)));
      reply.type('application/json; charset=utf-8');
      return JSON.stringify(paymentRequiredBody(error, requirementsV1(edge.settings, state.priced)));
    } catch (error) {
      request.log.warn({ err: error }, 'x402 settlement failed: the facilitator is unavailable');
      reply.code(503).header('retry-after', '5').type('application/json; charset=utf-8');
      return JSON.stringify({ statusCode: 503, code: 'x402_facilitator_unavailable', error: 'Service Unavailable', message: 'The x402 facilitator could not settle the payment; nothing was charged; retry later.' });
    }
  });

  // A balance charge: refunded when the answer is a 5xx, otherwise a hold is settled. Both are idempotent in the balance actor.
  app.addHook('onResponse', async (request, reply) => {
    const charge = request.x402Payment?.charge;
    if (!charge) return;
    const key = x402BalanceKey(charge.principal);
    if (reply.statusCode >= 500) {
      services.actors.tell(X402_BALANCE_KIND, key, { op: 'refund', charge_id: charge.charge_id, attempt: charge.attempt });
      payments.inc({ outcome: 'refunded' });
    } else if (charge.hold) {
      services.actors.tell(X402_BALANCE_KIND, key, { op: 'settle', charge_id: charge.charge_id, attempt: charge.attempt });
    }
  });
}
