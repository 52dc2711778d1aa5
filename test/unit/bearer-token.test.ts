import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { bearerTokenOf } from '../../http/auth/bearer-token.js';

const requestOn = (socket: object | null, authorization: string | undefined) => ({ headers: { authorization }, raw: { socket } }) as unknown as FastifyRequest;

/** bearerTokenOf remembers a connection's last header (http/auth/bearer-token.ts): what it answers is what the header says, whatever came before. */
describe('bearerTokenOf', () => {
  it('reads the token of each request, the same header again, another header, or the same on another connection', () => {
    const socket = {};
    expect(bearerTokenOf(requestOn(socket, 'Bearer aaa.bbb.ccc'))).toBe('aaa.bbb.ccc');
    expect(bearerTokenOf(requestOn(socket, 'Bearer aaa.bbb.ccc'))).toBe('aaa.bbb.ccc');
    expect(bearerTokenOf(requestOn(socket, 'bearer  ddd.eee.fff '))).toBe('ddd.eee.fff');
    expect(bearerTokenOf(requestOn({}, 'Bearer aaa.bbb.ccc'))).toBe('aaa.bbb.ccc');
    expect(bearerTokenOf(requestOn(null, 'Bearer ggg'))).toBe('ggg');
    expect(bearerTokenOf({ headers: { authorization: 'Bearer hhh' } } as unknown as FastifyRequest)).toBe('hhh');
  });

  it('refuses a missing, malformed or over-long header after a good one on the same connection', () => {
    const socket = {};
    expect(bearerTokenOf(requestOn(socket, 'Bearer aaa'))).toBe('aaa');
    expect(() => bearerTokenOf(requestOn(socket, undefined))).toThrow(/Missing bearer token/);
    expect(() => bearerTokenOf(requestOn(socket, 'Basic aaa'))).toThrow(/Missing bearer token/);
    expect(() => bearerTokenOf(requestOn(socket, `Bearer ${'x'.repeat(4097)}`))).toThrow(/invalid or expired/);
    expect(() => bearerTokenOf(requestOn(socket, `Bearer ${'x'.repeat(4097)}`))).toThrow(/invalid or expired/);
    expect(bearerTokenOf(requestOn(socket, 'Bearer aaa'))).toBe('aaa');
  });
});
