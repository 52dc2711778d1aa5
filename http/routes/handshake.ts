import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { randomId, ServiceError } from '../../runtime/index.js';
import { ledgerPolicy } from '../../actors/ledger/messages.js';
import { USER_ORGS_KIND, type Membership } from '../../actors/organizations/messages.js';
import { ITEM_CATALOG_KIND, itemCatalogKey, type CatalogMessage, type ContainerTreeView } from '../../actors/items/messages.js';
import {
  HANDSHAKE_INDEX_KIND,
  HANDSHAKE_SESSION_KIND,
  handshakeIndexKey,
  handshakePolicy as policy,
  handshakeSessionKey,
  OFFER_STATUSES,
  SESSION_SORT_FIELDS,
  SESSION_STATUSES,
  SETTLEMENT_STATUSES,
  type Bundle,
  type CancelReply,
  type ConfirmReply,
  type CreatedReply,
  type HistoryReply,
  type ListReply,
  type OfferView,
  type Policy,
  type SessionMessage,
  type SessionView,
  type SettlementView,
  type Side,
  type StageView,
} from '../../actors/handshake/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import type { Principal } from '../auth/principal.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';

/** Handshake negotiation and two-phase settlement (spec doc 2 §4.6; docs/api/handshake.md). */
const tags = ['handshake'];
const base = '/api/v1/handshake/:domain';

const literals = <T extends string>(values: readonly T[]) => Type.Union(values.map((value) => Type.Literal(value)));
const Time = Type.String({ format: 'date-time' });
const NullableTime = Type.Union([Time, Type.Null()]);
const NullableString = Type.Union([Type.String(), Type.Null()]);

const CurrencyLeg = Type.Object({
  currency_id: Type.String({ pattern: ledgerPolicy.currency_pattern, description: 'A ledger currency (docs/api/ledger.md).' }),
  amount: Type.Integer({ minimum: 1, maximum: ledgerPolicy.amount_max, description: 'Integer minor units (1050 is 10.50 USD).' }),
});
const ItemId = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_.:-]+$' });
const ItemLeg = Type.Object({
  item_id: Type.String({ ...ItemId, description: "An item (or stack) of the items area, in the session's domain." }),
  quantity: Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'Units of the item (1 for an item that does not stack).' }),
  container_id: Type.String({ ...ItemId, description: 'The container that holds it; its owner_id must be the giver (checked at stage).' }),
});
const Term = Type.Object({
  key: Type.String({ minLength: 1, maxLength: policy.term_key_length_max }),
  value: Type.String({ maxLength: policy.term_value_length_max }),
  binding: Type.Optional(Type.Boolean({ description: 'Default false.' })),
});
const SideBody = Type.Object({
  currency_legs: Type.Optional(Type.Array(CurrencyLeg, { maxItems: policy.currency_legs_max })),
  item_legs: Type.Optional(Type.Array(ItemLeg, { maxItems: policy.item_legs_max, description: 'Items this side gives: locked at stage, transferred at the commit (docs/api/handshake.md, "Item legs").' })),
  terms: Type.Optional(Type.Array(Term, { maxItems: policy.terms_max })),
});
const BundleBody = Type.Object({ initiator_gives: SideBody, responder_gives: SideBody });
type BundleBody = Static<typeof BundleBody>;

const SideView = Type.Object({
  currency_legs: Type.Array(Type.Object({ currency_id: Type.String(), amount: Type.Integer() })),
  item_legs: Type.Array(Type.Object({ item_id: Type.String(), quantity: Type.Integer(), container_id: Type.String() })),
  terms: Type.Array(Type.Object({ key: Type.String(), value: Type.String(), binding: Type.Boolean() })),
});
const PartyView = Type.Object({ id: Type.String(), kind: Type.Literal('auth_user'), label: Type.String() });
const PolicyView = Type.Object({ max_rounds: Type.Integer(), offer_ttl_seconds: Type.Integer(), session_ttl_seconds: Type.Integer(), settlement_timeout_seconds: Type.Integer() });
const Session = Type.Object(
  {
    session_id: Type.String(),
    domain: Type.String(),
    initiator: PartyView,
    responder: PartyView,
    policy: PolicyView,
    status: literals(SESSION_STATUSES),
    closed_reason: NullableString,
    round: Type.Integer(),
    active_offer_id: NullableString,
    settlement_id: NullableString,
    created_at: Time,
    updated_at: Time,
    expires_at: Time,
  },
  { title: 'HandshakeSession' },
);
const Offer = Type.Object(
  {
    offer_id: Type.String(),
    session_id: Type.String(),
    round: Type.Integer(),
    proposed_by: Type.String(),
    in_reply_to: NullableString,
    bundle: Type.Object({ initiator_gives: SideView, responder_gives: SideView }),
    status: literals(OFFER_STATUSES),
    created_at: Time,
    expires_at: Time,
    closed_at: NullableTime,
  },
  { title: 'HandshakeOffer' },
);
const Stage = Type.Object({
  party_id: Type.String(),
  staged: Type.Boolean(),
  staging: Type.Boolean(),
  confirmed: Type.Boolean(),
  ledger_hold_ids: Type.Array(Type.String()),
  item_lock_ids: Type.Array(Type.String()),
  receive_container_id: Type.Union([Type.String(), Type.Null()], { description: "Where this party receives the other side's items (named at stage)." }),
});
const Settlement = Type.Object(
  {
    settlement_id: Type.String(),
    session_id: Type.String(),
    accepted_offer_id: Type.String(),
    status: literals(SETTLEMENT_STATUSES),
    deadline_at: Time,
    initiator_stage: Stage,
    responder_stage: Stage,
    rollback_reason: NullableString,
    holds_captured: Type.Integer(),
    items_transferred: Type.Integer({ description: 'Item legs transferred so far (COMMITTING, SETTLED).' }),
    preparing: Type.Boolean({ description: 'Both confirmed; room for the items is being held in the receiving containers before the commit.' }),
    created_at: Time,
    completed_at: NullableTime,
  },
  { title: 'HandshakeSettlement' },
);
const Params = Type.Object({ domain: Type.String({ pattern: policy.domain_pattern, description: 'A name of your choosing that groups sessions (a game, a market).' }) });
const SessionParams = Type.Object({ domain: Params.properties.domain, session_id: Type.String({ minLength: 1, maxLength: 64 }) });
const OfferParams = Type.Object({ domain: Params.properties.domain, session_id: SessionParams.properties.session_id, offer_id: Type.String({ minLength: 1, maxLength: 80 }) });
const bound = (name: keyof Policy) => {
  const { min, max } = policy[name];
  return Type.Optional(Type.Integer({ minimum: min, maximum: max, description: `Default ${policy[name].default}.` }));
};
const CreateBody = Type.Object({
  counterparty_id: Type.String({ minLength: 1, maxLength: 64, description: "Another user of the caller's tenant." }),
  counterparty_kind: Type.Literal('auth_user'),
  policy: Type.Optional(Type.Object({ max_rounds: bound('max_rounds'), offer_ttl_seconds: bound('offer_ttl_seconds'), session_ttl_seconds: bound('session_ttl_seconds'), settlement_timeout_seconds: bound('settlement_timeout_seconds') })),
  opening_offer: Type.Optional(Type.Object({ bundle: BundleBody }, { description: "The initiator's first offer (round 1), made in the same turn." })),
});
type CreateBody = Static<typeof CreateBody>;
const ListQuery = Type.Object({
  mine: Type.Optional(Type.Boolean({ description: 'true: only sessions the caller is a party of (the default and the only sessions a caller can open: others are listed by summary for platform admins only).' })),
  status: Type.Optional(literals(SESSION_STATUSES)),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_by: Type.Optional(literals(SESSION_SORT_FIELDS)),
  sort_order: Type.Optional(literals(['asc', 'desc'] as const)),
});
const HistoryQuery = Type.Object({ view: Type.Optional(literals(['transcript', 'concessions'] as const)) });

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

function sideOf(body: Static<typeof SideBody>, field: string): Side {
  const item_legs = (body.item_legs ?? []).map((leg) => ({ item_id: leg.item_id, quantity: leg.quantity, container_id: leg.container_id }));
  const items = new Set<string>();
  item_legs.forEach((leg, index) => {
    const key = JSON.stringify([leg.container_id, leg.item_id]);
    if (items.has(key)) throw badRequest(`${field}.item_legs.${index}.item_id`, 'appears twice on one side: give one leg per item');
    items.add(key);
  });
  const currency_legs = body.currency_legs ?? [];
  const currencies = new Set<string>();
  currency_legs.forEach((leg, index) => {
    if (currencies.has(leg.currency_id)) throw badRequest(`${field}.currency_legs.${index}.currency_id`, 'appears twice on one side: give one leg per currency');
    currencies.add(leg.currency_id);
  });
  const terms = (body.terms ?? []).map((term) => ({ key: term.key, value: term.value, binding: term.binding ?? false }));
  const keys = new Set<string>();
  terms.forEach((term, index) => {
    if (keys.has(term.key)) throw badRequest(`${field}.terms.${index}.key`, 'appears twice on one side');
    keys.add(term.key);
  });
  return { currency_legs: currency_legs.map((leg) => ({ currency_id: leg.currency_id, amount: leg.amount })), item_legs, terms };
}

export function bundleOf(body: BundleBody, field: string): Bundle {
  const bundle = { initiator_gives: sideOf(body.initiator_gives, `${field}.initiator_gives`), responder_gives: sideOf(body.responder_gives, `${field}.responder_gives`) };
  const empty = (side: Side) => side.currency_legs.length === 0 && side.item_legs.length === 0 && side.terms.length === 0;
  if (empty(bundle.initiator_gives) && empty(bundle.responder_gives)) throw badRequest(field, 'must give something on at least one side (a currency leg, an item leg or a term)');
  return bundle;
}

function sessionShape(view: SessionView) {
  return {
    session_id: view.session_id,
    domain: view.domain,
    initiator: view.initiator,
    responder: view.responder,
    policy: view.policy,
    status: view.status,
    closed_reason: view.closed_reason,
    round: view.round,
    active_offer_id: view.active_offer_id,
    settlement_id: view.settlement_id,
    created_at: isoTime(view.created_at_ms)!,
    updated_at: isoTime(view.updated_at_ms)!,
    expires_at: isoTime(view.expires_at_ms)!,
  };
}

function offerShape(view: OfferView) {
  const { created_at_ms, expires_at_ms, closed_at_ms, ...rest } = view;
  return { ...rest, created_at: isoTime(created_at_ms)!, expires_at: isoTime(expires_at_ms)!, closed_at: isoTime(closed_at_ms) };
}

function stageShape(stage: StageView) {
  return { ...stage };
}

function settlementShape(view: SettlementView) {
  const { deadline_at_ms, created_at_ms, completed_at_ms, initiator_stage, responder_stage, ...rest } = view;
  return {
    ...rest,
    initiator_stage: stageShape(initiator_stage),
    responder_stage: stageShape(responder_stage),
    deadline_at: isoTime(deadline_at_ms)!,
    created_at: isoTime(created_at_ms)!,
    completed_at: isoTime(completed_at_ms),
  };
}

function policyOf(body: CreateBody['policy']): Policy {
  return {
    max_rounds: body?.max_rounds ?? policy.max_rounds.default,
    offer_ttl_seconds: body?.offer_ttl_seconds ?? policy.offer_ttl_seconds.default,
    session_ttl_seconds: body?.session_ttl_seconds ?? policy.session_ttl_seconds.default,
    settlement_timeout_seconds: body?.settlement_timeout_seconds ?? policy.settlement_timeout_seconds.default,
  };
}

export function handshakeRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const schema = (summary: string, parts: Record<string, unknown>, responses: Record<number, TSchema>, errors: number[] = []) => ({
    tags,
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, ...errors) },
  });
  const session = <Reply>(principal: Principal, domain: string, session_id: string, message: SessionMessage) =>
    services.actors.ask<Reply>(HANDSHAKE_SESSION_KIND, handshakeSessionKey(principal.tenant, domain, session_id), message);
  const readSession = <Reply>(principal: Principal, domain: string, session_id: string, message: SessionMessage) =>
    services.actors.ask<Reply>(HANDSHAKE_SESSION_KIND, handshakeSessionKey(principal.tenant, domain, session_id), message, { readOnly: true });

  app.get<{ Params: Static<typeof Params>; Querystring: Static<typeof ListQuery> }>(`${base}/sessions`, {
    onRequest: authenticate,
    schema: schema(
      `The domain's sessions the caller is a party of, newest first by default; status filters; sort_by ${SESSION_SORT_FIELDS.join(', ')}. A list may lag a session by the outbox's delivery (milliseconds). mine=false lists every session of the tenant's domain, for platform admins only (403 otherwise).`,
      { params: Params, querystring: ListQuery },
      { 200: Type.Object({ sessions: Type.Array(Session), pagination: Pagination }) },
      [403],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const query = request.query;
    if (query.mine === false && principal.role !== 'admin') throw new ServiceError('forbidden', 'Only a platform admin may list sessions it is not a party of.');
    const page = Math.max(1, query.page ?? 1);
    const page_size = Math.min(policy.page_size_max, query.page_size || policy.page_size_default);
    const view = await services.actors.ask<ListReply>(
      HANDSHAKE_INDEX_KIND,
      handshakeIndexKey(principal.tenant, request.params.domain),
      { op: 'list', query: { mine_of: query.mine === false ? null : principal.user_id, status: query.status, sort_by: query.sort_by ?? 'created_at', sort_order: query.sort_order ?? 'desc', page, page_size } },
      { readOnly: true },
    );
    return { sessions: view.sessions.map(sessionShape), pagination: { page, page_size, total: view.total, has_more: page * page_size < view.total } };
  });

  app.post<{ Params: Static<typeof Params>; Body: CreateBody }>(`${base}/sessions`, {
    onRequest: authenticate,
    schema: schema(
      "Open a session with another user of the caller's tenant (an organization member, with an org API key): 422 handshake_counterparty_invalid otherwise. Optional policy (defaults in docs/api/handshake.md) and opening offer (round 1).",
      { params: Params, body: CreateBody },
      { 201: Type.Object({ session: Session, opening_offer: Type.Union([Offer, Type.Null()]) }) },
      [422],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const opening_bundle = body.opening_offer ? bundleOf(body.opening_offer.bundle, 'body.opening_offer.bundle') : null;
    const counterparty = body.counterparty_id;
    if (counterparty === principal.user_id || principal.tenant === principal.user_id) {
      throw new ServiceError('handshake_counterparty_invalid', principal.tenant === principal.user_id ? 'A personal tenant has no other user: use an org API key.' : 'You cannot negotiate with yourself.');
    }
    const { memberships } = await services.actors.ask<{ memberships: Membership[] }>(USER_ORGS_KIND, counterparty, { op: 'list' }, { readOnly: true });
    if (!memberships.some((membership) => membership.org_id === principal.tenant)) throw new ServiceError('handshake_counterparty_invalid', 'The counterparty is not a member of your organization.');
    const domain = request.params.domain;
    const session_id = randomId('hs_');
    const created = await services.actors.ask<CreatedReply>(HANDSHAKE_SESSION_KIND, handshakeSessionKey(principal.tenant, domain, session_id), {
      op: 'init',
      init: {
        tenant: principal.tenant,
        domain,
        session_id,
        initiator: { id: principal.user_id, kind: 'auth_user', label: principal.user_id },
        responder: { id: counterparty, kind: 'auth_user', label: counterparty },
        policy: policyOf(body.policy),
        opening_bundle,
      },
    });
    return reply.code(201).send({ session: sessionShape(created.session), opening_offer: created.opening_offer && offerShape(created.opening_offer) });
  });

  app.get<{ Params: Static<typeof SessionParams> }>(`${base}/sessions/:session_id`, {
    onRequest: authenticate,
    schema: schema('One session, for its parties (anyone else: 404).', { params: SessionParams }, { 200: Session }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { domain, session_id } = request.params;
    return sessionShape(await readSession<SessionView>(principal, domain, session_id, { op: 'get', caller: principal.user_id }));
  });

  app.post<{ Params: Static<typeof SessionParams> }>(`${base}/sessions/:session_id/cancel`, {
    onRequest: authenticate,
    schema: schema(
      'Either party: end the session (CANCELLED). An open offer is cancelled; a settlement still STAGING is rolled back, every hold released (rolled_back: true). After both confirmed, or once ended: 409 handshake_invalid_state.',
      { params: SessionParams },
      { 200: Type.Object({ message: Type.String(), rolled_back: Type.Boolean(), session_id: Type.String(), session: Session }) },
      [404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { domain, session_id } = request.params;
    const cancelled = await session<CancelReply>(principal, domain, session_id, { op: 'cancel', caller: principal.user_id });
    return {
      message: cancelled.rolled_back ? 'Session cancelled; the settlement was rolled back and every hold released.' : 'Session cancelled.',
      rolled_back: cancelled.rolled_back,
      session_id: cancelled.session_id,
      session: sessionShape(cancelled.session),
    };
  });

  const Concessions = Type.Array(
    Type.Object({
      round: Type.Integer(),
      offer_id: Type.String(),
      proposed_by: Type.String(),
      deltas: Type.Array(
        Type.Object({
          party_id: Type.String(),
          role: literals(['initiator', 'responder'] as const),
          currency_deltas: Type.Array(Type.Object({ currency_id: Type.String(), delta: Type.Integer() })),
          items_added: Type.Array(Type.String()),
          items_removed: Type.Array(Type.String()),
          terms_changed: Type.Array(Type.String()),
        }),
      ),
    }),
  );
  app.get<{ Params: Static<typeof SessionParams>; Querystring: Static<typeof HistoryQuery> }>(`${base}/sessions/:session_id/history`, {
    onRequest: authenticate,
    schema: schema(
      'The transcript (every offer, oldest first, with its final status) and, with view=concessions, per-round deltas of what each party gives against the offer before.',
      { params: SessionParams, querystring: HistoryQuery },
      { 200: Type.Object({ session_id: Type.String(), view: literals(['transcript', 'concessions'] as const), offers: Type.Array(Offer), concessions: Concessions }) },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { domain, session_id } = request.params;
    const view = request.query.view ?? 'transcript';
    const history = await readSession<HistoryReply>(principal, domain, session_id, { op: 'history', caller: principal.user_id, view });
    return {
      session_id: history.session_id,
      view,
      offers: history.offers.map(offerShape),
      concessions: history.concessions,
    };
  });

  app.post<{ Params: Static<typeof SessionParams>; Body: { bundle: BundleBody } }>(`${base}/sessions/:session_id/offers`, {
    onRequest: authenticate,
    schema: schema(
      'Either party: make an offer (a new round). With an open offer made to you, this counters it (it becomes COUNTERED); with your own offer open: 409 handshake_offer_open. Past max_rounds: 409 handshake_max_rounds.',
      { params: SessionParams, body: Type.Object({ bundle: BundleBody }) },
      { 201: Offer },
      [404, 409, 422],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const { domain, session_id } = request.params;
    const bundle = bundleOf(request.body.bundle, 'body.bundle');
    const made = await session<OfferView>(principal, domain, session_id, { op: 'offer', caller: principal.user_id, bundle });
    return reply.code(201).send(offerShape(made));
  });

  app.post<{ Params: Static<typeof OfferParams> }>(`${base}/sessions/:session_id/offers/:offer_id/accept`, {
    onRequest: authenticate,
    schema: schema(
      'The party the offer was made to (403 for its proposer): accept the open offer. The session becomes AGREED and a settlement opens in STAGING with deadline_at (policy.settlement_timeout_seconds).',
      { params: OfferParams },
      { 200: Settlement },
      [403, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { domain, session_id, offer_id } = request.params;
    return settlementShape(await session<SettlementView>(principal, domain, session_id, { op: 'accept', caller: principal.user_id, offer_id }));
  });

  for (const [action, summary] of [
    ['reject', 'The party the offer was made to (403 for its proposer): reject the open offer (REJECTED). The session keeps negotiating unless this was the last round (then EXPIRED, closed_reason max_rounds).'],
    ['withdraw', 'The proposer (403 for the other party): withdraw the open offer (WITHDRAWN). The session keeps negotiating unless this was the last round.'],
  ] as const) {
    app.post<{ Params: Static<typeof OfferParams> }>(`${base}/sessions/:session_id/offers/:offer_id/${action}`, {
      onRequest: authenticate,
      schema: schema(summary, { params: OfferParams }, { 200: Offer }, [403, 404, 409]),
    }, async (request) => {
      const principal = requirePrincipal(request);
      const { domain, session_id, offer_id } = request.params;
      return offerShape(await session<OfferView>(principal, domain, session_id, { op: action, caller: principal.user_id, offer_id }));
    });
  }

  const StageBody = Type.Object({
    receive_container_id: Type.Optional(Type.String({ ...ItemId, description: "Required when the other side gives items: your container (owner_id = your user id) in the session's domain of the items area, where they arrive." })),
  });
  app.post<{ Params: Static<typeof SessionParams>; Body: Static<typeof StageBody> | undefined }>(`${base}/sessions/:session_id/settlement/stage`, {
    onRequest: authenticate,
    // The body is optional: without one, nothing is received (the other side gives no items).
    preValidation: async (request) => {
      request.body ??= {};
    },
    schema: schema(
      "Either party: place the ledger holds (one per currency leg) and the item locks (one per item leg) for what you give. Answers once every hold and lock is placed (staged: true, ledger_hold_ids, item_lock_ids); one refused (409 insufficient_funds, 404 items_item_not_found, 409 items_item_locked, ...) releases the others, and you may stage again. Staged already: the settlement as it is.",
      { params: SessionParams, body: StageBody },
      { 200: Settlement },
      [400, 404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { domain, session_id } = request.params;
    const container_id = request.body?.receive_container_id;
    // A read of the items catalog (its config: owner and limits never change); the session checks the owner in its turn.
    const receive = container_id === undefined
      ? null
      : (await services.actors.ask<ContainerTreeView>(ITEM_CATALOG_KIND, itemCatalogKey(principal.tenant, domain), { op: 'container_get', container_id, expand: false } satisfies CatalogMessage, { readOnly: true })).container;
    return settlementShape(await session<SettlementView>(principal, domain, session_id, { op: 'stage', caller: principal.user_id, receive }));
  });

  app.post<{ Params: Static<typeof SessionParams> }>(`${base}/sessions/:session_id/settlement/confirm`, {
    onRequest: authenticate,
    schema: schema(
      'Either party, once staged (409 handshake_not_staged before): confirm. The first confirmation answers WAITING_FOR_COUNTERPARTY; the second commits the swap (COMMITTED: every hold is captured and every item lock transferred to the other party, exactly once, and the settlement moves COMMITTING -> SETTLED). With item legs, room for the items is first held in each receiving container: without room, 409 items_capacity_exceeded and the party without room must confirm again. After the commit: ALREADY_CONFIRMED. A body, if any, is ignored (the spec names optional fields; none is used by this build).',
      { params: SessionParams },
      { 200: Type.Object({ outcome: literals(['WAITING_FOR_COUNTERPARTY', 'COMMITTED', 'ALREADY_CONFIRMED'] as const), settlement: Settlement }) },
      [404, 409],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { domain, session_id } = request.params;
    const confirmed = await session<ConfirmReply>(principal, domain, session_id, { op: 'confirm', caller: principal.user_id });
    return { outcome: confirmed.outcome, settlement: settlementShape(confirmed.settlement) };
  });

  app.post<{ Params: Static<typeof Params> }>(`${base}/settlements/sweep`, {
    onRequest: authenticate,
    schema: schema(
      "Roll back now every settlement of the tenant's domain still STAGING past its deadline (the deadline alarm does this too; the sweep is for operators who do not want to wait). cancelled counts the settlements asked to roll back.",
      { params: Params },
      { 200: Type.Object({ cancelled: Type.Integer(), message: Type.String() }) },
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const swept = await services.actors.ask<{ cancelled: number }>(HANDSHAKE_INDEX_KIND, handshakeIndexKey(principal.tenant, request.params.domain), { op: 'sweep' });
    return { cancelled: swept.cancelled, message: `${swept.cancelled} overdue settlement(s) rolled back.` };
  });
}
