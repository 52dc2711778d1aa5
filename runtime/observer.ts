/**
 * What the runtime reports about itself. http/metrics.ts implements it with
 * prom-client; the runtime itself knows nothing of metrics libraries.
 * Called once per batch or event, never per message, to stay off the hot path.
 */
export interface RuntimeObserver {
  activated(kind: string): void;
  passivated(kind: string): void;
  batch(kind: string, messages: number, turn_ms: number): void;
  commit(ops: number, commit_ms: number): void;
  overloaded(kind: string): void;
}

export interface RuntimeLogger {
  debug(object: object, message?: string): void;
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
}

export const silentLogger: RuntimeLogger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
};
