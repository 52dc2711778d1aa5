import { describe, expect, it } from 'vitest';
import { trustProxyFrom } from '../../http/config.js';

describe('TRUST_PROXY parsing', () => {
  it('off by default', () => {
    for (const raw of [undefined, '', ' ', '0', 'false']) expect(trustProxyFrom(raw)).toBe(false);
  });
  it('a hop count or a list of addresses and CIDRs', () => {
    expect(trustProxyFrom('2')).toBe(2);
    expect(trustProxyFrom('127.0.0.1, 10.0.0.0/8,::1')).toEqual(['127.0.0.1', '10.0.0.0/8', '::1']);
  });
  it('refuses true (any client could pick its address), junk and absurd hop counts', () => {
    expect(() => trustProxyFrom('true')).toThrow(/TRUST_PROXY/);
    expect(() => trustProxyFrom('proxy.example.com')).toThrow(/TRUST_PROXY/);
    expect(() => trustProxyFrom('99')).toThrow(/TRUST_PROXY/);
  });
});
