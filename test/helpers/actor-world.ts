import { ServiceError, type ActorSend, type RecordsActorDefinition, type TurnResult } from '../../runtime/index.js';
import { fixedContext } from './step.js';

/**
 * A pure, synchronous stand-in for the runtime, for step tests of flows that
 * span several `records` actors: each actor's state is rebuilt from its
 * records with `load` (and can be reloaded), `sends` are queued in order and
 * delivered by `drain` (or one by one with `deliverNext`, to interleave
 * flows), and asks are answered by the turn's reply or later by `replies`
 * (deferred). Errors a step throws are the ask's outcome. No clock, no I/O.
 */
export interface Outcome {
  reply?: any;
  code?: string;
  deferred: boolean;
}

export interface Delivery {
  kind: string;
  key: string;
  message: any;
}

/** The message a delivery carries for its receiver: a flow-call's `call` (actors/flow-call.ts), else the message itself. */
export function callOf(delivery: Delivery): any {
  return delivery.message?.op === 'flow-call' ? delivery.message.call : delivery.message;
}

export function actorWorld(definitions: RecordsActorDefinition<any, any, any>[], start_ms: number) {
  const byKind = new Map(definitions.map((d) => [d.kind, d]));
  const stores = new Map<string, Map<string, unknown>>();
  const states = new Map<string, unknown>();
  const queue: Delivery[] = [];
  const answers = new Map<string, Outcome>();
  const log: Delivery[] = [];
  let now = start_ms;
  let requests = 0;

  const id = (kind: string, key: string) => `${kind}\u0000${key}`;
  const storeOf = (kind: string, key: string) => {
    let store = stores.get(id(kind, key));
    if (!store) stores.set(id(kind, key), (store = new Map()));
    return store;
  };
  const load = (kind: string, key: string) => {
    const records = [...storeOf(kind, key).entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => [k, structuredClone(v)] as [string, unknown]);
    const state = byKind.get(kind)!.load(key, records);
    states.set(id(kind, key), state);
    return state;
  };
  const stateOf = (kind: string, key: string) => (states.has(id(kind, key)) ? states.get(id(kind, key)) : load(kind, key));

  /** One turn; returns the step's result, or the ServiceError code it threw (the state is reloaded then). */
  const turn = (kind: string, key: string, message: unknown, request_id: string | null): TurnResult<unknown, unknown> | { code: string } => {
    const definition = byKind.get(kind);
    if (!definition) throw new Error(`no actor kind ${kind}`);
    log.push({ kind, key, message });
    let result: TurnResult<unknown, unknown>;
    try {
      result = definition.step(stateOf(kind, key), message, { ...fixedContext(now, kind, key), request_id });
    } catch (error) {
      // As in the runtime: a ServiceError rejects the message only (the step threw before changing anything).
      if (error instanceof ServiceError) return { code: error.code };
      throw error;
    }
    states.set(id(kind, key), result.state);
    const store = storeOf(kind, key);
    for (const write of result.writes ?? []) {
      if (write.value === undefined) store.delete(write.subkey);
      else store.set(write.subkey, structuredClone(write.value));
    }
    for (const send of result.sends ?? []) queue.push(structuredClone(send as ActorSend) as Delivery);
    for (const answer of result.replies ?? []) {
      const waiting = answers.get(answer.request_id);
      if (!waiting?.deferred) continue;
      answers.set(answer.request_id, answer.error ? { code: answer.error.code, deferred: false } : { reply: answer.reply, deferred: false });
    }
    return result;
  };

  const world = {
    /** Asks without delivering anything after: the outcome so far (deferred while the flow runs). */
    send(kind: string, key: string, message: unknown): { request_id: string; outcome: () => Outcome } {
      const request_id = `req_${++requests}`;
      const result = turn(kind, key, message, request_id);
      if ('code' in result) answers.set(request_id, { code: result.code, deferred: false });
      else if (result.defer) answers.set(request_id, { deferred: true });
      else answers.set(request_id, { reply: result.reply, deferred: false });
      return { request_id, outcome: () => answers.get(request_id)! };
    },
    /** Asks and delivers every queued message until none is left: the final outcome. */
    ask(kind: string, key: string, message: unknown): Outcome {
      const sent = world.send(kind, key, message);
      world.drain();
      return sent.outcome();
    },
    /** The reply of an ask that must succeed. */
    reply(kind: string, key: string, message: unknown): any {
      const outcome = world.ask(kind, key, message);
      if (outcome.code !== undefined || outcome.deferred) throw new Error(`expected a reply, got ${JSON.stringify(outcome)}`);
      return outcome.reply;
    },
    /** The error code of an ask (undefined when it succeeds). */
    code(kind: string, key: string, message: unknown): string | undefined {
      return world.ask(kind, key, message).code;
    },
    deliverNext(): Delivery | undefined {
      const next = queue.shift();
      if (next) turn(next.kind, next.key, next.message, null);
      return next;
    },
    /** Delivers the first queued message matching `where`. */
    deliver(where: (d: Delivery) => boolean): Delivery {
      const at = queue.findIndex(where);
      if (at < 0) throw new Error('no such queued message');
      const [next] = queue.splice(at, 1);
      turn(next.kind, next.key, next.message, null);
      return next;
    },
    /** Removes the first queued message matching `where` without delivering it (to stand in for its receiver). */
    discard(where: (d: Delivery) => boolean): Delivery {
      const at = queue.findIndex(where);
      if (at < 0) throw new Error('no such queued message');
      return queue.splice(at, 1)[0];
    },
    /** Delivers a message as the outbox would (not asked). */
    inject(kind: string, key: string, message: unknown): void {
      turn(kind, key, message, null);
    },
    drain(limit = 100_000): void {
      for (let i = 0; queue.length > 0; i++) {
        if (i >= limit) throw new Error('the queue does not drain');
        world.deliverNext();
      }
    },
    /** The queued (undelivered) messages. */
    get queue(): readonly Delivery[] {
      return queue;
    },
    /** Every message delivered so far, in order. */
    get log(): readonly Delivery[] {
      return log;
    },
    state<S>(kind: string, key: string): S {
      return stateOf(kind, key) as S;
    },
    records(kind: string, key: string): Map<string, unknown> {
      return storeOf(kind, key);
    },
    /** Drops an actor's in-memory state: the next message rebuilds it from its records. */
    reload(kind: string, key: string) {
      return load(kind, key);
    },
    advance(ms: number) {
      now += ms;
    },
    get now() {
      return now;
    },
  };
  return world;
}
