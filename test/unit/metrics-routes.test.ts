import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../../http/plugins/metrics.js';

/** The per-route HTTP series the response hook keeps (Metrics.routeSeriesOf): every answer counted under its own labels. */
describe('HTTP request metrics by route', () => {
  const metrics = new Metrics();
  const app = Fastify();
  let base = '';

  beforeAll(async () => {
    metrics.register(app);
    app.get('/things/:id', async (request, reply) => ((request.params as { id: string }).id === 'missing' ? reply.code(404).send({ missing: true }) : { ok: true }));
    app.post('/things/:id', async () => ({ posted: true }));
    base = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await app.close();
  });

  const count = async (method: string, route: string, status: number): Promise<number> => {
    const json = await metrics.registry.getSingleMetric('http_requests_total')!.get();
    return json.values.find((v) => v.labels.method === method && v.labels.route === route && v.labels.status_code === status)?.value ?? 0;
  };
  const observed = async (method: string, route: string): Promise<number> => {
    const json = await metrics.registry.getSingleMetric('http_request_duration_seconds')!.get();
    return json.values.find((v) => (v as { metricName?: string }).metricName === 'http_request_duration_seconds_count' && v.labels.method === method && v.labels.route === route)?.value ?? 0;
  };

  it('counts each method and status of a route apart, and requests no route matched as unmatched', async () => {
    for (let i = 0; i < 3; i++) expect((await fetch(`${base}/things/${i}`)).status).toBe(200);
    expect((await fetch(`${base}/things/missing`)).status).toBe(404);
    expect((await fetch(`${base}/things/1`, { method: 'HEAD' })).status).toBe(200);
    expect((await fetch(`${base}/things/1`, { method: 'POST' })).status).toBe(200);
    expect((await fetch(`${base}/things/2`)).status).toBe(200);
    expect((await fetch(`${base}/nowhere`)).status).toBe(404);

    expect(await count('GET', '/things/:id', 200)).toBe(4);
    expect(await count('GET', '/things/:id', 404)).toBe(1);
    expect(await count('HEAD', '/things/:id', 200)).toBe(1);
    expect(await count('POST', '/things/:id', 200)).toBe(1);
    expect(await count('GET', 'unmatched', 404)).toBe(1);
    expect(await observed('GET', '/things/:id')).toBe(5);
    expect(await observed('HEAD', '/things/:id')).toBe(1);
  });

  it('counts afresh after the registry is reset', async () => {
    metrics.registry.resetMetrics();
    expect((await fetch(`${base}/things/1`)).status).toBe(200);
    expect(await count('GET', '/things/:id', 200)).toBe(1);
    expect(await observed('GET', '/things/:id')).toBe(1);
  });
});
