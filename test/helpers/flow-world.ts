import { isServiceError, type ActorDefinition, type ActorSend, type DeferredReply, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { allActors } from '../../areas.js';
import type { FlowCall } from '../../actors/flow-call.js';

/**
 * A small synchronous world for pure flow tests: it runs the real step
 * function of every kind the node registers (areas.ts), keeps each actor's
 * state, delivers `sends` in order (a refused delivery is dropped, as the
 * outbox does) and collects deferred replies. Time is `now`, ids are counted.
 */
export const WORLD_T0 = 1_700_000_000_000;

export type Outcome = { reply: unknown } | { error: { code: string; message: string } };

export class World {
  private readonly definitions = new Map<string, ActorDefinition>(allActors.map((definition) => [definition.kind, definition]));
  private readonly states = new Map<string, unknown>();
  private readonly queue: ActorSend[] = [];
  private readonly answered = new Map<string, DeferredReply>();
  private ids = 0;
  private requests = 0;
  now = WORLD_T0;
  /** Every message delivered through the outbox, in order. */
  readonly delivered: ActorSend[] = [];
  /** Delivers nothing to these kinds (a receiver that is down) while set. */
  holding = new Set<string>();

  context(kind: string, key: string, request_id: string | null): TurnContext {
    return { now: this.now, kind, key, request_id, newId: (prefix = '') => `${prefix}${++this.ids}` };
  }

  state<S>(kind: string, key: string): S {
    const id = `${kind}\u0000${key}`;
    if (!this.states.has(id)) {
      const definition = this.definitions.get(kind)!;
      this.states.set(id, definition.storage === 'snapshot' ? definition.initial(key) : definition.load(key, []));
    }
    return this.states.get(id) as S;
  }

  turn(kind: string, key: string, message: unknown, request_id: string | null = null): TurnResult<unknown, unknown> {
    const definition = this.definitions.get(kind)!;
    const result = definition.step(this.state(kind, key), message, this.context(kind, key, request_id));
    this.states.set(`${kind}\u0000${key}`, result.state);
    this.queue.push(...(result.sends ?? []));
    for (const reply of result.replies ?? []) this.answered.set(reply.request_id, reply);
    if (result.defer !== true && request_id !== null) this.answered.set(request_id, { request_id, reply: result.reply });
    return result;
  }

  /** An ask: the step's reply, or its deferred reply once the outbox is drained. */
  ask(kind: string, key: string, message: unknown): Outcome {
    const request_id = `req-${++this.requests}`;
    try {
      this.turn(kind, key, message, request_id);
    } catch (error) {
      if (isServiceError(error)) return { error: { code: error.code, message: error.message } };
      throw error;
    }
    this.drain();
    const answer = this.answered.get(request_id);
    if (!answer) return { error: { code: 'flow_interrupted', message: 'not answered' } };
    return answer.error ? { error: answer.error } : { reply: answer.reply };
  }

  /** The answer to an earlier ask that was not answered when it returned (a held delivery), once it is. */
  answerOf(request_id: string): Outcome | undefined {
    const answer = this.answered.get(request_id);
    if (!answer) return undefined;
    return answer.error ? { error: answer.error } : { reply: answer.reply };
  }

  /** The id the next ask will use (to look its answer up with answerOf). */
  nextRequestId(): string {
    return `req-${this.requests + 1}`;
  }

  drain(): void {
    const held: ActorSend[] = [];
    for (let send = this.queue.shift(); send !== undefined; send = this.queue.shift()) {
      if (this.holding.has(send.kind)) {
        held.push(send);
        continue;
      }
      this.delivered.push(send);
      try {
        this.turn(send.kind, send.key, send.message);
      } catch (error) {
        if (!isServiceError(error)) throw error; // refused for good: the outbox drops it
      }
    }
    this.queue.push(...held);
  }

  /** The calls a flow made, by kind and op. */
  calls(): string[] {
    return this.delivered
      .filter((send) => (send.message as { op: string }).op === 'flow-call')
      .map((send) => `${send.kind}:${((send.message as FlowCall<{ op: string }>).call).op}`);
  }
}

