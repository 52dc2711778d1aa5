import { describe, expect, it } from 'vitest';
import type { IncomingMessage } from 'node:http';
import { requestIdGenerator, requestIdOf } from '../../http/request-ids.js';

describe('request ids', () => {
  it('are distinct within a run: one random part, then a counter', () => {
    const next = requestIdGenerator();
    const ids = Array.from({ length: 10_000 }, () => next());
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^req_[A-Za-z0-9_-]{16}[0-9a-z]+$/);
    const run = ids[0].slice(0, 20);
    expect(ids.every((id) => id.startsWith(run))).toBe(true);
    expect(ids[0]).toBe(`${run}0`);
    expect(ids[36]).toBe(`${run}10`);
  });

  it('differ between runs (two generators stand for two processes)', () => {
    const a = requestIdGenerator();
    const b = requestIdGenerator();
    expect(a().slice(0, 20)).not.toBe(b().slice(0, 20));
  });

  it("take the client's X-Request-Id when it is 1-128 visible ASCII characters, else make one", () => {
    const idOf = requestIdOf(() => 'made');
    const request = (value?: string) => ({ headers: value === undefined ? {} : { 'x-request-id': value } }) as unknown as IncomingMessage;
    expect(idOf(request('trace-1'))).toBe('trace-1');
    expect(idOf(request('x'.repeat(128)))).toBe('x'.repeat(128));
    expect(idOf(request())).toBe('made');
    for (const refused of ['', 'x'.repeat(129), 'two words', 'tab\there', 'caf\u00e9', 'line\nbreak']) expect(idOf(request(refused))).toBe('made');
  });
});
