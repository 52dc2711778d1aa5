import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../../runtime/index.js';
import {
  HOLD_STATUSES,
  LEDGER_ACCOUNT_KIND,
  ledgerAccountKey,
  ledgerPolicy as policy,
  type AccountView,
  type CreditReply,
  type HoldsPage,
  type HoldView,
  type LedgerAccountMessage,
} from '../../actors/ledger/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import type { Principal } from '../auth/principal.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';

/** The ledger (docs/api/ledger.md): the caller's balances and holds; an admin's view of any account and credits. */
const tags = ['ledger'];
const base = '/api/v1/ledger';

const literals = <T extends string>(values: readonly T[]) => Type.Union(values.map((value) => Type.Literal(value)));
const Currency = Type.String({ pattern: policy.currency_pattern, description: 'A currency code: an uppercase letter, then up to 15 uppercase letters, digits or "_" (USD, GOLD, GEMS).' });
const Party = Type.Object({ tenant: Type.String(), user_id: Type.String() });
const Balance = Type.Object(
  {
    currency: Type.String(),
    balance: Type.Integer({ description: 'Minor units the account owns, held ones included.' }),
    held: Type.Integer({ description: 'Minor units reserved by open holds.' }),
    available: Type.Integer({ description: 'balance - held.' }),
  },
  { title: 'LedgerBalance' },
);
const Hold = Type.Object(
  {
    hold_id: Type.String(),
    currency: Type.String(),
    amount: Type.Integer(),
    status: literals(HOLD_STATUSES),
    purpose: Type.Union([Type.Object({ area: Type.String(), ref: Type.String() }), Type.Null()]),
    captured_amount: Type.Integer(),
    payee: Type.Union([Party, Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    closed_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { title: 'LedgerHold' },
);
const Account = Type.Object({ tenant: Type.String(), user_id: Type.String(), balances: Type.Array(Balance), holds: Type.Array(Hold) }, { title: 'LedgerAccount' });
const CreditBody = Type.Object({
  tenant: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: "The account's tenant (an organization id, or the user's own id); default: user_id (the user's personal tenant)." })),
  user_id: Type.String({ minLength: 1, maxLength: 64 }),
  currency: Currency,
  amount: Type.Integer({ minimum: 1, maximum: policy.amount_max, description: 'Minor units (an integer: 1050 is 10.50 USD).' }),
  reference: Type.String({ minLength: 1, maxLength: policy.reference_length_max, description: 'Your id for this credit: a repeat with the same reference changes nothing.' }),
});
const Credit = Type.Object({ reference: Type.String(), tenant: Type.String(), user_id: Type.String(), currency: Type.String(), amount: Type.Integer(), idempotent: Type.Boolean(), balance: Balance }, { title: 'LedgerCredit' });
const HoldsQuery = Type.Object({
  status: Type.Optional(literals(HOLD_STATUSES)),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
});
const AccountParams = Type.Object({ tenant: Type.String({ minLength: 1, maxLength: 64 }), user_id: Type.String({ minLength: 1, maxLength: 64 }) });

export function holdShape(hold: HoldView) {
  return {
    hold_id: hold.hold_id,
    currency: hold.currency,
    amount: hold.amount,
    status: hold.status,
    purpose: hold.purpose,
    captured_amount: hold.captured_amount,
    payee: hold.payee,
    created_at: isoTime(hold.created_at_ms)!,
    closed_at: isoTime(hold.closed_at_ms),
  };
}

function accountShape(view: AccountView) {
  return { tenant: view.tenant, user_id: view.user_id, balances: view.balances, holds: view.holds.map(holdShape) };
}

function requireAdmin(principal: Principal): void {
  if (principal.role !== 'admin') throw new ServiceError('forbidden', 'Only a platform admin may do this.');
}

export function ledgerRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const schema = (summary: string, parts: Record<string, unknown>, responses: Record<number, unknown>, errors: number[] = []) => ({
    tags,
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, ...errors) },
  });
  const read = <Reply>(tenant: string, user_id: string, message: LedgerAccountMessage) =>
    services.actors.ask<Reply>(LEDGER_ACCOUNT_KIND, ledgerAccountKey(tenant, user_id), message, { readOnly: true });

  app.get(`${base}/me`, {
    onRequest: authenticate,
    schema: schema("The caller's account in the credential's tenant: a balance per currency (balance, held, available) and the open holds, oldest first.", {}, { 200: Account }),
  }, async (request) => {
    const { tenant, user_id } = requirePrincipal(request);
    return accountShape(await read<AccountView>(tenant, user_id, { op: 'get', tenant, user_id }));
  });

  app.get<{ Querystring: Static<typeof HoldsQuery> }>(`${base}/me/holds`, {
    onRequest: authenticate,
    schema: schema("The caller's holds, newest first: open ones and the newest closed ones (captured or released).", { querystring: HoldsQuery }, { 200: Type.Object({ holds: Type.Array(Hold), pagination: Pagination }) }),
  }, async (request) => {
    const { tenant, user_id } = requirePrincipal(request);
    const page = Math.max(1, request.query.page ?? 1);
    const page_size = Math.min(policy.holds_page_size_max, request.query.page_size || 20);
    const view = await read<HoldsPage>(tenant, user_id, { op: 'holds', status: request.query.status, page, page_size });
    return { holds: view.holds.map(holdShape), pagination: { page, page_size, total: view.total, has_more: page * page_size < view.total } };
  });

  app.get<{ Params: Static<typeof AccountParams> }>(`${base}/accounts/:tenant/:user_id`, {
    onRequest: authenticate,
    schema: schema('Platform admin: any account (an account never credited or held answers with no balances).', { params: AccountParams }, { 200: Account }, [403]),
  }, async (request) => {
    requireAdmin(requirePrincipal(request));
    const { tenant, user_id } = request.params;
    return accountShape(await read<AccountView>(tenant, user_id, { op: 'get', tenant, user_id }));
  });

  app.post<{ Body: Static<typeof CreditBody> }>(`${base}/credits`, {
    onRequest: authenticate,
    schema: schema(
      'Platform admin: credit an account, idempotent by reference (201 the first time, 200 with idempotent: true for a repeat; the same reference with another amount or currency: 409 ledger_reference_conflict).',
      { body: CreditBody },
      { 200: Credit, 201: Credit },
      [403, 409],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    requireAdmin(principal);
    const { user_id, currency, amount, reference } = request.body;
    const tenant = request.body.tenant ?? user_id;
    const credited = await services.actors.ask<CreditReply>(LEDGER_ACCOUNT_KIND, ledgerAccountKey(tenant, user_id), { op: 'credit', tenant, user_id, reference, currency, amount, by: principal.user_id });
    return reply.code(credited.idempotent ? 200 : 201).send({ ...credited, tenant, user_id });
  });
}
