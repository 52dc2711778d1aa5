import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { routeConfigOf, routeUrlOf } from '../../http/route-config.js';

/** routeConfigOf reads the same config as Fastify's request.routeOptions, for routed and unrouted requests. */
describe('routeConfigOf', () => {
  it('is request.routeOptions.config, and routeUrlOf its url', async () => {
    const app = Fastify();
    const seen: { url: unknown; same: boolean; config: unknown }[] = [];
    app.addHook('onResponse', (request, _reply, done) => {
      seen.push({ url: routeUrlOf(request), same: routeConfigOf(request) === request.routeOptions.config, config: routeConfigOf(request) });
      done();
    });
    app.get('/a/:id', { config: { secretQuery: true } }, async () => 'ok');
    app.post('/b', async () => 'ok');
    await app.inject({ method: 'GET', url: '/a/7?x=1' });
    await app.inject({ method: 'POST', url: '/b', payload: {} });
    await app.inject({ method: 'GET', url: '/nowhere' });
    expect(seen.map((s) => s.url)).toEqual(['/a/:id', '/b', undefined]);
    expect(seen.every((s) => s.same)).toBe(true);
    expect(seen[0]!.config).toMatchObject({ secretQuery: true, url: '/a/:id', method: 'GET' });
    await app.close();
  });
});
