import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { lazyChildLoggerFactory, LazyRequestLogger } from '../../http/request-logger.js';

/** request.log: no pino child until a line is written; lines carry the request's bindings. */
function capture(level: string) {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

describe('LazyRequestLogger', () => {
  it('writes nothing and makes no child for a disabled level', () => {
    const { logger, lines } = capture('warn');
    let children = 0;
    const child = logger.child.bind(logger);
    logger.child = ((...args: Parameters<typeof logger.child>) => (children++, child(...args))) as typeof logger.child;
    const log = new LazyRequestLogger(logger, { request_id: 'req_1' });
    log.info({ a: 1 }, 'not written');
    log.debug('not written');
    log.trace('not written');
    expect(lines).toEqual([]);
    expect(children).toBe(0);
    expect(log.level).toBe('warn');
    log.warn({ status: 503 }, 'written');
    log.error('also written');
    expect(children).toBe(1);
    expect(lines.map((l) => [l.msg, l.request_id, l.status])).toEqual([
      ['written', 'req_1', 503],
      ['also written', 'req_1', undefined],
    ]);
  });

  it('is what the factory gives, unless the route sets its own level', () => {
    const { logger, lines } = capture('info');
    const lazy = lazyChildLoggerFactory(logger, { request_id: 'req_2' }, {});
    expect(lazy).toBeInstanceOf(LazyRequestLogger);
    lazy.info('hello');
    lazy.child({ part: 'x' }).info('from a child');
    expect(lines.map((l) => [l.msg, l.request_id, l.part])).toEqual([
      ['hello', 'req_2', undefined],
      ['from a child', 'req_2', 'x'],
    ]);
    const routed = lazyChildLoggerFactory(logger, { request_id: 'req_3' }, { level: 'error' });
    expect(routed).not.toBeInstanceOf(LazyRequestLogger);
    expect(routed.level).toBe('error');
  });
});
