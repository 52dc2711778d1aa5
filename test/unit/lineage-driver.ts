import { ServiceError, type ActorDefinition, type TurnContext } from '../../runtime/index.js';
import { lineageActors } from '../../actors/lineage/actor.js';

/**
 * The lineage actors' step functions driven in memory (no runtime, no disk):
 * an ask runs its turn, then every send is delivered in order, as the outbox
 * would, until none is left; a deferred ask is answered from the turns'
 * `replies`. Enough to test the breed and founder flows end to end, fast.
 */
export class LineageSim {
  readonly states = new Map<string, unknown>();
  now = 1_700_000_000_000;
  private ids = 0;
  private requests = 0;
  private readonly definitions = new Map<string, ActorDefinition>(lineageActors.map((definition) => [definition.kind, definition]));
  private readonly answers = new Map<string, { reply?: unknown; error?: { code: string; message: string; details?: unknown } }>();
  /** Sends held back instead of delivered (to interleave flows). */
  held: { kind: string; key: string; message: unknown }[] = [];
  hold = false;

  private state(kind: string, key: string): unknown {
    const id = `${kind}|${key}`;
    if (!this.states.has(id)) {
      const definition = this.definitions.get(kind)!;
      this.states.set(id, definition.storage === 'snapshot' ? definition.initial(key) : definition.load(key, []));
    }
    return this.states.get(id);
  }

  private turn(kind: string, key: string, message: unknown, request_id: string | null) {
    const definition = this.definitions.get(kind);
    if (!definition) throw new Error(`no kind ${kind}`);
    const context: TurnContext = { now: this.now, kind, key, request_id, newId: (prefix = '') => `${prefix}${++this.ids}` };
    const result = definition.step(this.state(kind, key), message as never, context);
    this.states.set(`${kind}|${key}`, result.state);
    for (const answer of result.replies ?? []) this.answers.set(answer.request_id, answer);
    return result;
  }

  /** Delivers queued sends until none is left. */
  drain(queue: { kind: string; key: string; message: unknown }[]): void {
    while (queue.length > 0) {
      const send = queue.shift()!;
      if (this.hold) {
        this.held.push(send);
        continue;
      }
      try {
        const result = this.turn(send.kind, send.key, send.message, null);
        queue.push(...(result.sends ?? []));
      } catch (error) {
        // An outbox message refused with a ServiceError is dropped, as the runtime does.
        if (!(error instanceof ServiceError)) throw error;
      }
    }
  }

  release(): void {
    this.hold = false;
    const held = this.held;
    this.held = [];
    this.drain(held);
  }

  /** Asks and runs the consequences; throws the ServiceError the ask ends with. Deferred and unanswered: returns undefined. */
  ask<T = any>(kind: string, key: string, message: unknown): T {
    const request_id = `req_${++this.requests}`;
    const result = this.turn(kind, key, message, request_id);
    this.drain([...(result.sends ?? [])]);
    if (!result.defer) return result.reply as T;
    const answer = this.answers.get(request_id);
    if (!answer) return undefined as T;
    if (answer.error) throw new ServiceError(answer.error.code as never, answer.error.message, { details: answer.error.details });
    return answer.reply as T;
  }

  /** The ServiceError code an ask ends with, or undefined. */
  codeOf(kind: string, key: string, message: unknown): string | undefined {
    try {
      this.ask(kind, key, message);
      return undefined;
    } catch (error) {
      if (error instanceof ServiceError) return error.code;
      throw error;
    }
  }
}
