import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'fastify/types/logger.js';

/**
 * `request.log` without a pino child per request. Fastify's default makes
 * `logger.child({request_id})` for every request, and a child costs more
 * than a lock's whole actor turn (measured: 15-18 µs of the edge's CPU per
 * request), while a request at the shipped level (info, no per-request
 * line) usually logs nothing. This logger answers disabled levels with a
 * no-op and makes the real child, with the same bindings, only when a line
 * is written (an error, a warning, the debug request line).
 */
type LogArgs = Parameters<FastifyBaseLogger['info']>;

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;

export class LazyRequestLogger {
  private real?: FastifyBaseLogger;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
  ) {}

  private logger(): FastifyBaseLogger {
    return (this.real ??= this.parent.child(this.bindings));
  }

  private enabled(level: (typeof LEVELS)[number]): boolean {
    const isLevelEnabled = (this.parent as { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled;
    return isLevelEnabled === undefined || isLevelEnabled.call(this.parent, level);
  }

  get level(): string {
    return this.real?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.logger().level = level;
  }

  fatal(...args: LogArgs): void {
    if (this.enabled('fatal')) this.logger().fatal(...args);
  }
  error(...args: LogArgs): void {
    if (this.enabled('error')) this.logger().error(...args);
  }
  warn(...args: LogArgs): void {
    if (this.enabled('warn')) this.logger().warn(...args);
  }
  info(...args: LogArgs): void {
    if (this.enabled('info')) this.logger().info(...args);
  }
  debug(...args: LogArgs): void {
    if (this.enabled('debug')) this.logger().debug(...args);
  }
  trace(...args: LogArgs): void {
    if (this.enabled('trace')) this.logger().trace(...args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger().child(bindings, options);
  }
}

/**
 * Fastify's `childLoggerFactory`: the lazy logger, unless the route sets its
 * own log level (then the child is made at once, with that level).
 */
export function lazyChildLoggerFactory(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  if (options.level !== undefined) return logger.child(bindings, options);
  return new LazyRequestLogger(logger, bindings) as unknown as FastifyBaseLogger;
}
