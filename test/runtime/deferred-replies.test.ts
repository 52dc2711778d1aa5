import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ActorRuntime, LmdbStore, ManualClock, ServiceError, type DeferredReply, type SnapshotActorDefinition } from '../../runtime/index.js';
import { settle, startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { ControlledStore } from './test-actors.js';

/**
 * Deferred replies: a flow actor defers its answer, works through the outbox
 * with another actor, and answers the original ask from a later turn.
 */

interface FlowState {
  /** step -> the request_id of the ask that started it (persisted, as the step contract asks). */
  waiting: Record<string, string>;
  /** request_id seen by each turn, in order (null for tells, alarms, outbox deliveries). */
  seen: (string | null)[];
}

type FlowMessage =
  | { op: 'book'; step: string; quantity: number }
  | { op: 'reserved'; step: string; ok: boolean; left: number }
  | { op: 'park'; step: string }
  | { op: 'answer'; replies: DeferredReply[] }
  | { op: 'probe' }
  | { op: 'set-alarm'; at: number }
  | { op: 'crash' }
  | { op: 'get' };

/** A saga step: 'book' defers, asks the stock actor through the outbox, and answers when the stock replies. */
const flowActor: SnapshotActorDefinition<FlowState, FlowMessage, unknown> = {
  kind: 'flow',
  storage: 'snapshot',
  initial: () => ({ waiting: {}, seen: [] }),
  step(state, message, context) {
    const seen = [...state.seen, context.request_id];
    switch (message.op) {
      case 'book':
        return {
          state: { waiting: { ...state.waiting, [message.step]: context.request_id! }, seen },
          sends: [{ kind: 'stock', key: 'widgets', message: { op: 'reserve', step: message.step, quantity: message.quantity, reply_to: context.key } }],
          defer: true,
        };
      case 'reserved': {
        const request_id = state.waiting[message.step];
        const { [message.step]: _, ...waiting } = state.waiting;
        const reply: DeferredReply = message.ok
          ? { request_id, reply: { step: message.step, left: message.left } }
          : { request_id, error: { code: 'conflict', message: 'Out of stock.', details: { left: message.left } } };
        return { state: { waiting, seen }, replies: [reply] };
      }
      case 'park':
        return { state: { waiting: { ...state.waiting, [message.step]: context.request_id! }, seen }, defer: true, reply: 'not this' };
      case 'answer':
        return { state: { ...state, seen }, replies: message.replies, reply: 'answered' };
      case 'probe':
        return { state: { ...state, seen }, reply: context.request_id };
      case 'set-alarm':
        return { state, alarms: [{ name: 'tick', due_ms: message.at }], reply: true };
      case 'crash':
        throw new Error('a defect');
      case 'get':
        return { state, reply: state, defer: false };
      case '$alarm':
        return { state: { ...state, seen } };
    }
  },
};

interface StockState {
  left: number;
  seen: (string | null)[];
}

type StockMessage = { op: 'reserve'; step: string; quantity: number; reply_to: string } | { op: 'get' };

const stockActor: SnapshotActorDefinition<StockState, StockMessage, unknown> = {
  kind: 'stock',
  storage: 'snapshot',
  initial: () => ({ left: 5, seen: [] }),
  step(state, message, context) {
    if (message.op === 'get') return { state, reply: state };
    if (message.op !== 'reserve') return { state };
    const ok = message.quantity <= state.left;
    const left = ok ? state.left - message.quantity : state.left;
    return {
      state: { left, seen: [...state.seen, context.request_id] },
      sends: [{ kind: 'flow', key: message.reply_to, message: { op: 'reserved', step: message.step, ok, left } }],
      // Outbox deliveries are not asked: a defer here must be ignored.
      defer: true,
    };
  },
};

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function runtimeWith(options: Parameters<typeof startTestRuntime>[1] = {}): Promise<TestRuntime> {
  const handle = await startTestRuntime([flowActor, stockActor], options);
  cleanups.push(async () => handle.destroy());
  return handle;
}

/** Parks an ask on flow `key` and returns its promise and request_id (read back from the persisted state). */
async function park(runtime: ActorRuntime, key: string, step: string) {
  let settled = false;
  const pending = runtime.ask('flow', key, { op: 'park', step });
  pending.then(
    () => (settled = true),
    () => (settled = true),
  );
  await settle();
  const state = await runtime.ask<FlowState>('flow', key, { op: 'get' });
  return { pending, request_id: state.waiting[step], isSettled: () => settled };
}

describe('deferred replies', () => {
  it('a two-actor saga: A defers, B answers through the outbox, A answers the original ask', async () => {
    const { runtime } = await runtimeWith();
    const booked = await runtime.ask('flow', 'order-1', { op: 'book', step: 'reserve', quantity: 2 });
    expect(booked).toEqual({ step: 'reserve', left: 3 });
    const flow = await runtime.ask<FlowState>('flow', 'order-1', { op: 'get' });
    expect(flow.waiting).toEqual({});
    expect(flow.seen[0]).toEqual(expect.any(String));
    // The reply came back through the outbox: not an ask.
    expect(flow.seen[1]).toBeNull();
    const stock = await runtime.ask<StockState>('stock', 'widgets', { op: 'get' });
    // B's defer was ignored (its message was not asked), or A would never have heard back.
    expect(stock).toEqual({ left: 3, seen: [null] });
  });

  it('rejects the ask with the error a later turn answers', async () => {
    const { runtime } = await runtimeWith();
    const refused = runtime.ask('flow', 'order-2', { op: 'book', step: 'reserve', quantity: 9 });
    await expect(refused).rejects.toBeInstanceOf(ServiceError);
    await expect(refused).rejects.toMatchObject({ code: 'conflict', statusCode: 409, message: 'Out of stock.', details: { left: 5 } });
  });

  it('releases a deferred reply only after the commit of the turn that answers it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runtime-deferred-'));
    const store = new ControlledStore(new LmdbStore({ path: dir }));
    const runtime = new ActorRuntime({ store, clock: new ManualClock(), partitionCount: 4 });
    runtime.register(flowActor).register(stockActor);
    await runtime.start();
    cleanups.push(async () => {
      store.holdCommits = false;
      store.releaseHeld();
      await runtime.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    const parked = await park(runtime, 'gate', 'p');
    await settle(10);
    // The deferring turn committed long ago, yet its reply ('not this') was not sent.
    expect(parked.isSettled()).toBe(false);
    store.holdCommits = true;
    const answering = runtime.ask('flow', 'gate', { op: 'answer', replies: [{ request_id: parked.request_id, reply: 'done' }] });
    await settle(10);
    expect(store.heldCount()).toBe(1);
    expect(parked.isSettled()).toBe(false);
    store.holdCommits = false;
    store.releaseHeld();
    expect(await parked.pending).toBe('done');
    expect(await answering).toBe('answered');
  });

  it('ignores an unknown or already answered request_id', async () => {
    const { runtime } = await runtimeWith();
    const parked = await park(runtime, 'u', 'p');
    expect(await runtime.ask('flow', 'u', { op: 'answer', replies: [{ request_id: 'no-such-request', reply: 1 }] })).toBe('answered');
    expect(parked.isSettled()).toBe(false);
    await runtime.ask('flow', 'u', { op: 'answer', replies: [{ request_id: parked.request_id, reply: 'first' }] });
    await runtime.ask('flow', 'u', { op: 'answer', replies: [{ request_id: parked.request_id, reply: 'second' }] });
    expect(await parked.pending).toBe('first');
    // Another actor cannot answer an ask this one deferred.
    const other = await park(runtime, 'v', 'p');
    await runtime.ask('flow', 'w', { op: 'answer', replies: [{ request_id: other.request_id, reply: 'foreign' }] });
    await settle();
    expect(other.isSettled()).toBe(false);
  });

  it('rejects an unanswered ask with flow_interrupted after deferred_reply_ms_max on the injected clock', async () => {
    const { runtime, clock } = await runtimeWith();
    const parked = await park(runtime, 't', 'p');
    clock.advance(runtime.limits.deferred_reply_ms_max - 1);
    await settle();
    expect(parked.isSettled()).toBe(false);
    clock.advance(1);
    await expect(parked.pending).rejects.toMatchObject({ code: 'flow_interrupted', statusCode: 503, retryAfterSeconds: 1 });
    // Answering it afterwards is a no-op.
    expect(await runtime.ask('flow', 't', { op: 'answer', replies: [{ request_id: parked.request_id, reply: 'late' }] })).toBe('answered');
  });

  it('rejects pending asks with flow_interrupted when the runtime stops', async () => {
    const handle = await startTestRuntime([flowActor, stockActor]);
    const parked = await park(handle.runtime, 's', 'p');
    await handle.destroy();
    await expect(parked.pending).rejects.toMatchObject({ code: 'flow_interrupted' });
  });

  it('rejects pending asks with flow_interrupted when a defect reloads the actor', async () => {
    const { runtime } = await runtimeWith();
    const parked = await park(runtime, 'd', 'p');
    await expect(runtime.ask('flow', 'd', { op: 'crash' })).rejects.toMatchObject({ code: 'internal_error' });
    await expect(parked.pending).rejects.toMatchObject({ code: 'flow_interrupted' });
  });

  it('does not passivate an actor while asks wait on it', async () => {
    const { runtime } = await runtimeWith();
    const parked = await park(runtime, 'idle', 'p');
    expect(runtime.passivateIdle(0)).toBe(0);
    await runtime.ask('flow', 'idle', { op: 'answer', replies: [{ request_id: parked.request_id, reply: 'ok' }] });
    expect(await parked.pending).toBe('ok');
    expect(runtime.passivateIdle(0)).toBe(1);
  });

  it('refuses a deferring ask past deferred_replies_per_actor_max with actor_overloaded', async () => {
    const { runtime } = await runtimeWith({ limits: { deferred_replies_per_actor_max: 2 } });
    await park(runtime, 'full', 'a');
    await park(runtime, 'full', 'b');
    await expect(runtime.ask('flow', 'full', { op: 'park', step: 'c' })).rejects.toMatchObject({ code: 'actor_overloaded', statusCode: 503 });
  });

  it('gives asks a unique request_id and tells, alarms and outbox deliveries none', async () => {
    const { runtime, clock } = await runtimeWith();
    const first = await runtime.ask<string>('flow', 'ids', { op: 'probe' });
    const second = await runtime.ask<string>('flow', 'ids', { op: 'probe' });
    expect(first).toEqual(expect.any(String));
    expect(second).toEqual(expect.any(String));
    expect(first).not.toBe(second);
    runtime.tell('flow', 'ids', { op: 'probe' });
    await runtime.ask('flow', 'ids', { op: 'set-alarm', at: clock.now() + 1000 });
    clock.advance(1000);
    await settle();
    const state = await runtime.ask<FlowState>('flow', 'ids', { op: 'get' });
    // probe (ask), probe (ask), probe (tell), alarm.
    expect(state.seen).toEqual([first, second, null, null]);
    // Outbox deliveries: the stock actor's turn in the saga saw null (checked above); so does the flow's.
    await runtime.ask('flow', 'ids2', { op: 'book', step: 's', quantity: 1 });
    expect((await runtime.ask<FlowState>('flow', 'ids2', { op: 'get' })).seen[1]).toBeNull();
  });
});
