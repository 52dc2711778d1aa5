import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { replyHeadersOf, resetReplyHeadersSymbol } from '../../http/reply-headers.js';

/** replyHeadersOf gives Fastify's own header object: a header stored in it is sent as reply.header would send it. */
describe('replyHeadersOf', () => {
  afterEach(() => resetReplyHeadersSymbol());

  async function answers(): Promise<{ direct: Record<string, unknown>; viaHeader: Record<string, unknown>; seen: unknown; found: boolean }> {
    const app = Fastify();
    let seen: unknown;
    let found = false;
    app.get('/direct', async (_request, reply) => {
      const headers = replyHeadersOf(reply);
      found = headers !== null;
      if (headers) headers['x-limit'] = '"default";r=5;t=60';
      else reply.header('x-limit', '"default";r=5;t=60');
      seen = reply.getHeader('x-limit');
      return { ok: true };
    });
    app.get('/header', async (_request, reply) => {
      reply.header('x-limit', '"default";r=5;t=60');
      return { ok: true };
    });
    const direct = await app.inject({ method: 'GET', url: '/direct' });
    const viaHeader = await app.inject({ method: 'GET', url: '/header' });
    await app.close();
    const strip = (h: Record<string, unknown>) => Object.fromEntries(Object.entries(h).filter(([k]) => k !== 'date'));
    return { direct: strip(direct.headers), viaHeader: strip(viaHeader.headers), seen, found };
  }

  it('is the object reply.header writes: same response, and reply.getHeader reads it', async () => {
    const { direct, viaHeader, seen, found } = await answers();
    expect(found).toBe(true);
    expect(direct['x-limit']).toBe('"default";r=5;t=60');
    expect(direct).toEqual(viaHeader);
    expect(seen).toBe('"default";r=5;t=60');
  });

  it('is null for a reply that does not hold the symbol found (a second copy of Fastify)', async () => {
    resetReplyHeadersSymbol(Symbol('fastify.reply.headers'));
    const { direct, viaHeader, found } = await answers();
    expect(found).toBe(false);
    expect(direct['x-limit']).toBe('"default";r=5;t=60');
    expect(direct).toEqual(viaHeader);
  });

  it('is null when Fastify has no such symbol, and the caller falls back to reply.header', async () => {
    resetReplyHeadersSymbol(null);
    const { direct, viaHeader, found } = await answers();
    expect(found).toBe(false);
    expect(direct['x-limit']).toBe('"default";r=5;t=60');
    expect(direct).toEqual(viaHeader);
  });
});
