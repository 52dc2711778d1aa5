import type { ActorRuntime } from '../../runtime/index.js';
import { startPhase } from './status-line.js';

/**
 * Load loops against an in-process runtime. Every loop is bounded twice: by
 * a message count and by wall time.
 */
export interface DriveResult {
  /** Messages whose turn ran (and, for writes, whose batch committed). */
  messages: number;
  elapsed_ms: number;
}

export function perSecond(result: DriveResult): number {
  return Math.round((result.messages / result.elapsed_ms) * 1000);
}

/**
 * Tells: each actor gets chunks of `chunk` tells followed by one ask of
 * `barrier` (a message that changes nothing, e.g. a read): FIFO, so it
 * answers once the chunk before it ran and committed. At most two chunks per
 * actor are queued, so mailboxes stay under their bound (chunk <= 4,999) and
 * actors never starve. Barrier asks are not counted.
 */
export async function driveTells(
  runtime: ActorRuntime,
  kind: string,
  keys: string[],
  message: unknown,
  options: { seconds: number; messagesMax: number; chunk: number; barrier: unknown },
): Promise<DriveResult> {
  const endPhase = startPhase('loop', options.seconds, true);
  const started_ms = performance.now();
  const deadline_ms = started_ms + options.seconds * 1000;
  let sent = 0;
  async function lane(key: string): Promise<void> {
    let previous: Promise<unknown> = Promise.resolve();
    while (performance.now() < deadline_ms && sent < options.messagesMax) {
      for (let i = 0; i < options.chunk; i++) runtime.tell(kind, key, message);
      sent += options.chunk;
      const barrier = runtime.ask(kind, key, options.barrier);
      await previous;
      previous = barrier;
    }
    await previous;
  }
  await Promise.all(keys.map(lane)).finally(endPhase);
  return { messages: sent, elapsed_ms: performance.now() - started_ms };
}

/**
 * Asks in a closed loop: `inFlightPerKey` asks per actor are always
 * outstanding; each reply sends the next ask, until time or count runs out.
 */
export function driveAsks(
  runtime: ActorRuntime,
  kind: string,
  keys: string[],
  message: unknown,
  options: { seconds: number; messagesMax: number; inFlightPerKey: number },
): Promise<DriveResult> {
  const endPhase = startPhase('loop', options.seconds, true);
  return new Promise<DriveResult>((resolve, reject) => {
    const started_ms = performance.now();
    const deadline_ms = started_ms + options.seconds * 1000;
    let completed = 0;
    let issued = 0;
    let active = 0;
    let stopped = false;
    let failure: unknown;
    const finish = () => {
      if (failure !== undefined) reject(failure);
      else resolve({ messages: completed, elapsed_ms: performance.now() - started_ms });
    };
    const slot = (key: string) => {
      const onReply = () => {
        completed++;
        if ((completed & 1023) === 0 && performance.now() >= deadline_ms) stopped = true;
        if (!stopped && issued < options.messagesMax) {
          issued++;
          runtime.ask(kind, key, message).then(onReply, onError);
        } else if (--active === 0) finish();
      };
      const onError = (error: unknown) => {
        failure ??= error;
        stopped = true;
        if (--active === 0) finish();
      };
      active++;
      issued++;
      runtime.ask(kind, key, message).then(onReply, onError);
    };
    for (const key of keys) for (let i = 0; i < options.inFlightPerKey; i++) slot(key);
  }).finally(endPhase);
}
