import client from 'prom-client';
import { describe, expect, it } from 'vitest';
import { FastCounter, FastHistogram } from '../../http/fast-metrics.js';

/** The per-request metrics read exactly like prom-client's own, in /metrics and in get(). */
const lines = (text: string) => text.split('\n').filter((line) => line !== '').sort();

describe('FastCounter and FastHistogram', () => {
  it('give the text and the values prom-client gives for the same observations', async () => {
    const reference = new client.Registry();
    const fast = new client.Registry();
    const refCounter = new client.Counter({ name: 'req_total', help: 'h', labelNames: ['method', 'route', 'status_code'], registers: [reference] });
    const refHistogram = new client.Histogram({ name: 'req_seconds', help: 'h', labelNames: ['method', 'route'], buckets: [0.001, 0.01, 0.1], registers: [reference] });
    const counter = new FastCounter('req_total', 'h', fast);
    const histogram = new FastHistogram('req_seconds', 'h', [0.001, 0.01, 0.1], fast);
    const observations: [string, string, number, number][] = [
      ['GET', '/a', 200, 0.0005],
      ['GET', '/a', 200, 0.001],
      ['GET', '/a', 404, 0.05],
      ['POST', '/b/:id', 201, 0.2],
      ['GET', '/a', 200, 0.009],
    ];
    for (const [method, route, status_code, seconds] of observations) {
      refCounter.inc({ method, route, status_code });
      refHistogram.observe({ method, route }, seconds);
      counter.seriesOf(`${method} ${route} ${status_code}`, () => ({ method, route, status_code })).value++;
      histogram.observe(histogram.seriesOf(`${method} ${route}`, () => ({ method, route })), seconds);
    }
    expect(lines(await fast.metrics())).toEqual(lines(await reference.metrics()));
    const sortValues = (json: { values: { metricName?: string; labels: object; value: number }[] }) =>
      json.values.map((v) => JSON.stringify([v.metricName, Object.entries(v.labels).sort(), v.value])).sort();
    expect(sortValues(await histogram.get())).toEqual(sortValues((await refHistogram.get()) as never));
    expect(sortValues(await counter.get())).toEqual(sortValues((await refCounter.get()) as never));
    fast.resetMetrics();
    expect((await counter.get()).values).toEqual([]);
  });

  it('keeps at most 10,000 label sets; the rest share one overflow series', async () => {
    const counter = new FastCounter('many_total', 'h', new client.Registry());
    for (let i = 0; i < 10_005; i++) counter.seriesOf(`k${i}`, () => ({ route: `/r${i}` })).value++;
    const values = (await counter.get()).values;
    expect(values).toHaveLength(10_001);
    expect(values.at(-1)).toEqual({ labels: { overflow: 'true' }, value: 5 });
  });
});
