import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ServiceError, type ActorClient } from '../../runtime/index.js';
import { LOCK_KIND } from '../../actors/locks/messages.js';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/**
 * x402 payment proofs end to end: the node verifies and settles X-PAYMENT
 * (v1) and PAYMENT-SIGNATURE (v2) proofs through a fake facilitator, a real
 * HTTP server on loopback speaking the facilitator's /verify and /settle.
 */
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
const PAY_TO = '0x2222222222222222222222222222222222222222';
const PAYER = '0xAbCdEf0123456789aBcDeF0123456789AbCdEf01';
const LOCK_TEMPLATE = '/api/v1/distributed-state/:namespace/:key/lock';

interface Call {
  operation: string;
  body: any;
}

/** The fake facilitator: a proof is valid when its signature is "good"; its transaction is derived from its nonce. */
const facilitator = {
  calls: [] as Call[],
  settleFails: false,
  broken: false,
  server: null as Server | null,
  url: '',
};

function startFacilitator(): Promise<void> {
  facilitator.server = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk) => (text += chunk));
    request.on('end', () => {
      const operation = (request.url ?? '').slice(1);
      if (facilitator.broken) {
        response.writeHead(500).end('boom');
        return;
      }
      if (request.method === 'GET' && operation === 'supported') {
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kinds: [{ x402Version: 1, scheme: 'exact', network: 'base-sepolia' }] }));
        return;
      }
      const body = JSON.parse(text);
      facilitator.calls.push({ operation, body });
      const inner = body.paymentPayload.payload;
      const from = inner.authorization?.from ?? PAYER;
      let answer: unknown;
      if (operation === 'verify') {
        answer = inner.signature === 'good' ? { isValid: true, payer: from } : { isValid: false, invalidReason: 'invalid_exact_evm_payload_signature', payer: from };
      } else if (operation === 'settle') {
        answer = facilitator.settleFails
          ? { success: false, errorReason: 'insufficient_funds', transaction: '', network: body.paymentRequirements.network, payer: from }
          : { success: true, transaction: `0xtx${inner.authorization?.nonce ?? 'n'}`, network: body.paymentRequirements.network, payer: from };
      } else {
        response.writeHead(404).end();
        return;
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  return new Promise((resolve) =>
    facilitator.server!.listen(0, '127.0.0.1', () => {
      facilitator.url = `http://127.0.0.1:${(facilitator.server!.address() as AddressInfo).port}`;
      resolve();
    }),
  );
}

let nonce = 0;
function proofV1(options: { signature?: string; network?: string; value?: string } = {}): string {
  const payload = {
    x402Version: 1,
    scheme: 'exact',
    network: options.network ?? 'base-sepolia',
    payload: { signature: options.signature ?? 'good', authorization: { from: PAYER, to: PAY_TO, value: options.value ?? '50000', validAfter: '0', validBefore: '9999999999', nonce: `${++nonce}` } },
  };
  return Buffer.from(JSON.stringify(payload)).toString('base64');
}

function proofV2(): string {
  const payload = {
    x402Version: 2,
    accepted: { scheme: 'exact', network: 'eip155:84532', amount: '50000', asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', payTo: PAY_TO, maxTimeoutSeconds: 60 },
    payload: { signature: 'good', authorization: { from: PAYER, to: PAY_TO, value: '50000', nonce: `${++nonce}` } },
  };
  return Buffer.from(JSON.stringify(payload)).toString('base64');
}

const decode = (header: string | null) => JSON.parse(Buffer.from(header!, 'base64').toString('utf8'));
const operations = () => facilitator.calls.map((call) => call.operation);

let t: TestNode;
let admin: string;
let user: Awaited<ReturnType<TestNode['newUser']>>;
let keyCounter = 0;
const lockPath = () => `/api/v1/distributed-state/proof/k${++keyCounter}/lock`;

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, message: expect.any(String) });
}

beforeAll(async () => {
  await startFacilitator();
  t = await startTestNode({
    config: { adminEmail: ADMIN.email, adminPassword: ADMIN.password, x402Enabled: true, x402PayTo: PAY_TO, x402FacilitatorUrl: facilitator.url, x402FacilitatorTimeoutMs: 2_000 },
  });
  admin = (await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } })).body.access_token;
  user = await t.newUser('prover');
  await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'GET', path: LOCK_TEMPLATE, amount_usd: '0.05' } });
  await t.request('POST', '/admin/x402/pricing/endpoints', { token: admin, body: { method: 'POST', path: LOCK_TEMPLATE, amount_usd: '0.05', settle_mode: 'settle_before' } });
});
afterAll(async () => {
  await t?.destroy();
  await new Promise((resolve) => facilitator.server?.close(resolve));
});
beforeEach(() => {
  facilitator.calls = [];
  facilitator.settleFails = false;
  facilitator.broken = false;
});

describe('X-PAYMENT on a priced route', () => {
  it('verifies, runs the handler, settles after it and answers X-PAYMENT-RESPONSE', async () => {
    const path = lockPath();
    const res = await t.request('GET', path, { token: user.token, headers: { 'x-payment': proofV1() } });
    expect(res.status, res.text).toBe(200);
    expect(operations()).toEqual(['verify', 'settle']);
    const [verify] = facilitator.calls;
    expect(verify.body).toMatchObject({ x402Version: 1, paymentPayload: { scheme: 'exact', network: 'base-sepolia' } });
    expect(verify.body.paymentRequirements).toMatchObject({ scheme: 'exact', network: 'base-sepolia', maxAmountRequired: '50000', payTo: PAY_TO, resource: `${t.url}${path}`, asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' });
    expect(decode(res.headers.get('x-payment-response'))).toMatchObject({ success: true, transaction: expect.stringMatching(/^0xtx/), network: 'base-sepolia', payer: PAYER });
    // The proof paid: the (empty) balance was not touched.
    expect((await t.request('GET', '/api/v1/x402/balance', { token: user.token })).body.balance_atomic).toBe(0);
  });

  it('accepts a v2 PAYMENT-SIGNATURE and answers PAYMENT-RESPONSE', async () => {
    const res = await t.request('GET', lockPath(), { token: user.token, headers: { 'payment-signature': proofV2() } });
    expect(res.status, res.text).toBe(200);
    expect(facilitator.calls[0].body).toMatchObject({ x402Version: 2, paymentRequirements: { network: 'eip155:84532', amount: '50000', payTo: PAY_TO } });
    expect(decode(res.headers.get('payment-response'))).toMatchObject({ success: true, network: 'eip155:84532' });
  });

  it('a proof the facilitator refuses is a 402 with its reason, and nothing is settled', async () => {
    const res = await t.request('GET', lockPath(), { token: user.token, headers: { 'x-payment': proofV1({ signature: 'bad' }) } });
    expect(res.status, res.text).toBe(402);
    expect(res.body).toMatchObject({ x402Version: 1, code: 'payment_required', error: expect.stringContaining('invalid_exact_evm_payload_signature') });
    expect(operations()).toEqual(['verify']);
  });

  it('malformed proofs and proofs for another network are 402 without asking the facilitator', async () => {
    for (const header of ['not base64 !', Buffer.from('[1]').toString('base64'), Buffer.from('{"x402Version":3}').toString('base64'), proofV1({ network: 'base' })]) {
      const res = await t.request('GET', lockPath(), { token: user.token, headers: { 'x-payment': header } });
      expect(res.status, header).toBe(402);
      expect(res.body.accepts).toHaveLength(1);
    }
    expect(operations()).toEqual([]);
  });

  it('a failed settlement turns the answer into a 402', async () => {
    facilitator.settleFails = true;
    const res = await t.request('GET', lockPath(), { token: user.token, headers: { 'x-payment': proofV1() } });
    expect(res.status, res.text).toBe(402);
    expect(res.body.error).toContain('insufficient_funds');
    expect(operations()).toEqual(['verify', 'settle']);
  });

  it('a 5xx answer is never settled', async () => {
    const client = t.node.services.actors as ActorClient;
    const ask = client.ask.bind(client);
    client.ask = ((kind: string, key: string, message: unknown, options?: object) =>
      kind === LOCK_KIND ? Promise.reject(new ServiceError('partition_unavailable', 'simulated outage')) : ask(kind, key, message, options)) as ActorClient['ask'];
    try {
      const res = await t.request('GET', lockPath(), { token: user.token, headers: { 'x-payment': proofV1() } });
      expectError(res, 503, 'partition_unavailable');
    } finally {
      client.ask = ask;
    }
    expect(operations()).toEqual(['verify']);
  });

  it('settle_before settles before the handler runs; a failed settlement stops it', async () => {
    const path = lockPath();
    const paid = await t.request('POST', path, { token: user.token, body: { owner_id: 'o' }, headers: { 'x-payment': proofV1() } });
    expect(paid.status, paid.text).toBe(200);
    expect(operations()).toEqual(['verify', 'settle']);
    expect(decode(paid.headers.get('x-payment-response')).success).toBe(true);
    facilitator.settleFails = true;
    const other = lockPath();
    const refused = await t.request('POST', other, { token: user.token, body: { owner_id: 'o' }, headers: { 'x-payment': proofV1() } });
    expect(refused.status).toBe(402);
    facilitator.settleFails = false;
    // The handler did not run: the lock is free.
    const status = await t.request('GET', other, { token: user.token, headers: { 'x-payment': proofV1() } });
    expect(status.body.is_locked).toBe(false);
  });

  it('an unavailable facilitator is a 503 with Retry-After, and nothing is charged', async () => {
    facilitator.broken = true;
    const res = await t.request('GET', lockPath(), { token: user.token, headers: { 'x-payment': proofV1() } });
    expectError(res, 503, 'x402_facilitator_unavailable');
    expect(res.headers.get('retry-after')).toBe('5');
  });
});

describe('paying once for a session and a balance', () => {
  it('POST /x402/session with a proof credits the payer and issues a session for it', async () => {
    const proof = proofV1({ value: '200000' });
    const res = await t.request('POST', '/x402/session', { body: { amount_usd: '0.2' }, headers: { 'x-payment': proof } });
    expect(res.status, res.text).toBe(200);
    const principal = `x402:base-sepolia:${PAYER.toLowerCase()}`;
    expect(res.body).toMatchObject({ principal, token_type: 'Bearer', expires_in: 900 });
    expect(facilitator.calls[0].body.paymentRequirements).toMatchObject({ maxAmountRequired: '200000', resource: `${t.url}/x402/session` });
    const session = res.body.token;
    expect((await t.request('GET', '/api/v1/x402/balance', { token: session })).body).toEqual({ balance_atomic: 200_000, balance_usd: '0.2' });
    // The same settled transaction is never credited twice.
    const again = await t.request('POST', '/x402/session', { body: { amount_usd: '0.2' }, headers: { 'x-payment': proof } });
    expect(again.status).toBe(200);
    expect((await t.request('GET', '/api/v1/x402/balance', { token: session })).body.balance_usd).toBe('0.2');
    // The session pays on priced routes from the payer's balance, as the payer's tenant.
    const paid = await t.request('GET', lockPath(), { token: session });
    expect(paid.status, paid.text).toBe(200);
    expect(paid.headers.get('x402-balance-usd')).toBe('0.15');
    // And an admin sees the payer as a principal to credit.
    const credited = await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '1', principal } });
    expect(credited.body.balance_usd).toBe('1.15');
  });

  it('a user tops up with a proof; a refused proof is a 402 and credits nothing', async () => {
    const buyer = await t.newUser('buyer');
    const res = await t.request('POST', '/api/v1/x402/topup', { token: buyer.token, body: { amount_usd: '0.5' }, headers: { 'x-payment': proofV1({ value: '500000' }) } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ balance_usd: '0.5', credited_usd: '0.5', transaction: expect.stringMatching(/^base-sepolia:0xtx/) });
    const refused = await t.request('POST', '/api/v1/x402/topup', { token: buyer.token, body: { amount_usd: '0.5' }, headers: { 'x-payment': proofV1({ signature: 'bad' }) } });
    expect(refused.status).toBe(402);
    expect((await t.request('GET', '/api/v1/x402/balance', { token: buyer.token })).body.balance_usd).toBe('0.5');
  });

  it('a top-up past the balance maximum is refused before the payment is settled: nothing is paid', async () => {
    const whale = await t.newUser('whale');
    expect((await t.request('POST', '/api/v1/x402/topup', { token: admin, body: { amount_usd: '999999999.8', principal: whale.user_id } })).status).toBe(200);
    facilitator.calls = [];
    const refused = await t.request('POST', '/api/v1/x402/topup', { token: whale.token, body: { amount_usd: '0.5' }, headers: { 'x-payment': proofV1({ value: '500000' }) } });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.body.code).toBe('x402_balance_limit_reached');
    expect(operations()).toEqual([]);
    expect((await t.request('GET', '/api/v1/x402/balance', { token: whale.token })).body.balance_usd).toBe('999999999.8');
  });
});

it('preflight reaches the facilitator', async () => {
  const res = await t.request('GET', '/admin/x402/preflight', { token: admin });
  expect(res.body.facilitator_url).toBe(facilitator.url);
  const checks = Object.fromEntries(res.body.checks.map((c: { check: string; passed: boolean }) => [c.check, c.passed]));
  expect(checks).toMatchObject({ facilitator_configured: true, facilitator_reachable: true });
  expect(res.body.ready).toBe(true);
});
