import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../http/config.js';
import {
  decodePaymentProof,
  matchingRequirement,
  paymentRequiredBody,
  paymentRequiredHeaderV2,
  requirementsV1,
  requirementsV2,
  v1NetworkName,
} from '../../http/x402-protocol.js';

const settings = { payTo: '0x1111111111111111111111111111111111111111', networks: ['base-sepolia', 'base'] };
const priced = { amount_atomic: 10_000, resource: 'https://api.example.com/api/v1/things/1', description: 'A thing', method: 'GET', discoverable: true };
const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64');

describe('x402 protocol shapes', () => {
  it('builds one v1 and one v2 requirement per network with the atomic amount as a string', () => {
    const v1 = requirementsV1(settings, priced);
    expect(v1.map((r) => [r.network, r.maxAmountRequired, r.asset])).toEqual([
      ['base-sepolia', '10000', '0x036CbD53842c5426634e7929541eC2318f3dCF7e'],
      ['base', '10000', '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'],
    ]);
    expect(Object.keys(v1[0]).sort()).toEqual(['asset', 'description', 'extra', 'maxAmountRequired', 'maxTimeoutSeconds', 'mimeType', 'network', 'outputSchema', 'payTo', 'resource', 'scheme']);
    const v2 = requirementsV2(settings, priced);
    expect(v2.map((r) => [r.network, r.amount])).toEqual([['eip155:84532', '10000'], ['eip155:8453', '10000']]);
    expect(v1NetworkName('eip155:8453')).toBe('base');
    expect(v1NetworkName('solana')).toBe('solana');
  });

  it('the 402 body is x402 v1 and the error shape at once; the header is the v2 PaymentRequired', () => {
    const body = paymentRequiredBody('pay first', requirementsV1(settings, priced));
    expect(body).toMatchObject({ x402Version: 1, error: 'pay first', statusCode: 402, code: 'payment_required', message: 'pay first' });
    const header = JSON.parse(Buffer.from(paymentRequiredHeaderV2('pay first', priced, requirementsV2(settings, priced)), 'base64').toString('utf8'));
    expect(header).toMatchObject({ x402Version: 2, error: 'pay first', resource: { url: priced.resource, description: 'A thing', mimeType: 'application/json' } });
    expect(header.accepts).toHaveLength(2);
  });

  it('decodes v1 and v2 proofs and refuses anything else', () => {
    const v1 = decodePaymentProof(b64({ x402Version: 1, scheme: 'exact', network: 'base', payload: {} }));
    expect(v1).toMatchObject({ version: 1, scheme: 'exact', network: 'base' });
    const v2 = decodePaymentProof(b64({ x402Version: 2, accepted: { scheme: 'exact', network: 'eip155:8453' }, payload: {} }));
    expect(v2).toMatchObject({ version: 2, network: 'eip155:8453' });
    for (const bad of ['', '***', b64('not json'), b64([1]), b64(null), b64({ x402Version: 1, scheme: 'exact' }), b64({ x402Version: 2, accepted: 'x' }), 'A'.repeat(9_000)]) {
      expect(decodePaymentProof(bad), bad.slice(0, 20)).toBeNull();
    }
  });

  it('matches a proof to the requirement of its scheme and network', () => {
    const proof = decodePaymentProof(b64({ x402Version: 1, scheme: 'exact', network: 'base', payload: {} }))!;
    expect(matchingRequirement(proof, requirementsV1(settings, priced))?.network).toBe('base');
    expect(matchingRequirement(proof, requirementsV1({ ...settings, networks: ['base-sepolia'] }, priced))).toBeNull();
  });
});

describe('x402 configuration', () => {
  it('is off by default, with base-sepolia and no facilitator', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({ x402Enabled: false, x402FacilitatorUrl: '', x402PayTo: '', x402Networks: ['base-sepolia'], x402SessionTtlSeconds: 900, x402PriceCacheMs: 5_000 });
  });

  it('reads and checks the X402_ variables', () => {
    const config = loadConfig({ X402_ENABLED: '1', X402_FACILITATOR_URL: 'https://x402.example.com/facilitator/', X402_PAY_TO: '0x1111111111111111111111111111111111111111', X402_NETWORKS: 'base, base-sepolia' });
    expect(config).toMatchObject({ x402Enabled: true, x402FacilitatorUrl: 'https://x402.example.com/facilitator', x402Networks: ['base', 'base-sepolia'] });
    expect(() => loadConfig({ X402_ENABLED: '2' })).toThrow(/X402_ENABLED/);
    expect(() => loadConfig({ X402_PAY_TO: 'alice' })).toThrow(/X402_PAY_TO/);
    expect(() => loadConfig({ X402_FACILITATOR_URL: 'ftp://x' })).toThrow(/X402_FACILITATOR_URL/);
    expect(() => loadConfig({ X402_NETWORKS: 'Base Mainnet' })).toThrow(/X402_NETWORKS/);
    expect(() => loadConfig({ X402_SESSION_TTL_SECONDS: '5' })).toThrow(/X402_SESSION_TTL_SECONDS/);
  });
});
