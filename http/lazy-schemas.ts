import type { FastifyValidationResult } from 'fastify/types/schema.js';

type CompiledValidator = FastifyValidationResult;
type Compile<F> = () => F;

/**
 * Route schemas compiled on first use instead of at start-up.
 *
 * Why: compiling every route's validators (ajv) and response serialisers
 * (fast-json-stringify) was over half of a node's start-up: about 1.5 s of
 * its 2.6 s to ready on an idle machine, more under load. A node restarted
 * after a crash serves nothing, and in a cluster leads nothing, until it is
 * ready, so start-up is part of recovery. Fastify asks for a compiled
 * function per route part as routes are readied; it gets a wrapper that
 * compiles on its first call (the same function and the same errors as
 * before, one call later).
 *
 * `compileAll` compiles whatever is still waiting, in one go (the test that
 * every route's schemas compile uses it, so a bad schema still fails the
 * suite as it once failed start-up); `warmUp` does it in the background, one
 * schema per turn of the event loop, so that requests keep being served
 * meanwhile and the first request of a route rarely pays for its compile.
 */
export class LazySchemas {
  /** Compilations not yet done, oldest first. */
  private readonly waiting = new Set<() => void>();
  private warming = false;

  get pending(): number {
    return this.waiting.size;
  }

  /** A validator that compiles on its first call; it carries ajv's `errors` of its last call, as Fastify reads them. */
  validator(compile: Compile<CompiledValidator>): CompiledValidator {
    const compiled = this.onFirstUse(compile);
    const validate: CompiledValidator = (data: unknown) => {
      const fn = compiled();
      const result = fn(data);
      validate.errors = fn.errors;
      return result;
    };
    return validate;
  }

  /** A serialiser that compiles on its first call. */
  serializer(compile: Compile<(data: unknown) => string>): (data: unknown) => string {
    const compiled = this.onFirstUse(compile);
    return (data: unknown) => compiled()(data);
  }

  /** The compiled function, compiled on the first call of the getter (or by compileAll / warmUp), once. */
  private onFirstUse<F>(compile: Compile<F>): () => F {
    let compiled: F | undefined;
    const ensure = (): F => {
      if (compiled === undefined) {
        compiled = compile();
        this.waiting.delete(ensure);
      }
      return compiled;
    };
    this.waiting.add(ensure);
    return ensure;
  }

  /** Compiles everything still waiting; throws the first compile error. */
  compileAll(): void {
    for (const ensure of [...this.waiting]) ensure();
  }

  /**
   * Compiles what is waiting in the background, one schema per event-loop
   * turn (setImmediate: I/O is served between two). A schema that fails to
   * compile is reported and left for its first request to fail on.
   */
  warmUp(onError: (error: unknown) => void, onDone?: (compiled: number, elapsed_ms: number) => void): void {
    if (this.warming) return;
    this.warming = true;
    const started_ms = performance.now();
    let compiled = 0;
    const next = () => {
      const ensure = this.waiting.values().next().value;
      if (ensure === undefined) {
        this.warming = false;
        onDone?.(compiled, performance.now() - started_ms);
        return;
      }
      try {
        ensure();
        compiled++;
      } catch (error) {
        // Not retried here: its route answers 500 until the schema is fixed, as a failed start-up would have shown.
        this.waiting.delete(ensure);
        onError(error);
      }
      // Not unref'd: with only unref'd immediates pending, the event loop waits in its poll phase for
      // the next timer or I/O between two (about 10 ms here), and warming up took a minute, not seconds.
      setImmediate(next);
    };
    setImmediate(next);
  }
}
