import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { backoffMs, signature, signatureHeader, unitHash } from '../../actors/webhooks/signing.js';

const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

describe('webhook signing (Standard Webhooks)', () => {
  it('verifies with the standardwebhooks package', () => {
    const body = JSON.stringify({ id: 'evt_1', type: 'test.webhook', timestamp: '2026-01-01T00:00:00.000Z', data: { a: 1 } });
    const timestamp_s = Math.floor(Date.now() / 1000);
    const signed = signature(secret, 'evt_1', timestamp_s, body);
    expect(signed).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const verified = new Webhook(secret).verify(body, { 'webhook-id': 'evt_1', 'webhook-timestamp': String(timestamp_s), 'webhook-signature': signed });
    expect(verified).toEqual(JSON.parse(body));
    // Same as the library's own signing.
    expect(new Webhook(secret).sign('evt_1', new Date(timestamp_s * 1000), body)).toBe(signed);
  });

  it('carries one signature per secret after a rotation; either secret verifies', () => {
    const other = `whsec_${Buffer.alloc(24, 9).toString('base64')}`;
    const body = '{"x":1}';
    const timestamp_s = Math.floor(Date.now() / 1000);
    const header = signatureHeader([other, secret], 'evt_2', timestamp_s, body);
    expect(header.split(' ')).toHaveLength(2);
    const headers = { 'webhook-id': 'evt_2', 'webhook-timestamp': String(timestamp_s), 'webhook-signature': header };
    expect(new Webhook(other).verify(body, headers)).toEqual({ x: 1 });
    expect(new Webhook(secret).verify(body, headers)).toEqual({ x: 1 });
    expect(() => new Webhook(`whsec_${Buffer.alloc(24, 1).toString('base64')}`).verify(body, headers)).toThrow();
  });
});

describe('webhook retry backoff', () => {
  it('doubles per attempt within [0.5, 1) of the exponential value, capped', () => {
    for (let attempt = 1; attempt <= 12; attempt++) {
      const exponential = Math.min(3_600_000, 5_000 * 2 ** (attempt - 1));
      const wait = backoffMs(attempt, 5_000, 3_600_000, 'evt_x');
      expect(wait).toBeGreaterThanOrEqual(exponential * 0.5);
      expect(wait).toBeLessThan(exponential);
    }
    expect(backoffMs(20, 5_000, 3_600_000, 'evt_x')).toBeLessThan(3_600_000);
  });

  it('is deterministic per event and attempt, and spreads across events', () => {
    expect(backoffMs(3, 5_000, 3_600_000, 'evt_a')).toBe(backoffMs(3, 5_000, 3_600_000, 'evt_a'));
    const waits = new Set(Array.from({ length: 50 }, (_, i) => backoffMs(1, 5_000, 3_600_000, `evt_${i}`)));
    expect(waits.size).toBeGreaterThan(40);
    const units = Array.from({ length: 1000 }, (_, i) => unitHash(`k${i}`));
    expect(Math.min(...units)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...units)).toBeLessThan(1);
    const mean = units.reduce((a, b) => a + b, 0) / units.length;
    expect(mean).toBeGreaterThan(0.4);
    expect(mean).toBeLessThan(0.6);
  });
});
