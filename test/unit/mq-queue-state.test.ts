import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MQ_QUEUE_KIND, mqQueueKey, type QueueMessage, type QueueSettings, type ReceivedMessage } from '../../actors/mq/messages.js';
import { emptyQueue, loadQueue, stepQueue, type QueueState } from '../../actors/mq/queue-state.js';
import type { AlarmMessage, TurnResult } from '../../runtime/index.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** The queue actor's pure step: visibility, delay, FIFO, dead-letter moves, long polling, retention. */
const T0 = 1_700_000_000_000;

const settings = (overrides: Partial<QueueSettings> = {}): QueueSettings => ({
  visibility_timeout_seconds: 30,
  delay_seconds: 0,
  message_retention_minutes: 60,
  fifo: false,
  max_receive_count: 0,
  dead_letter_queue: null,
  ...overrides,
});

/** One queue, driven turn by turn; its records kept as the runtime would, so it can be reloaded. */
function queueWorld(name = 'orders', options: Partial<QueueSettings> = {}) {
  const key = mqQueueKey('tenant-1', name);
  let state: QueueState = emptyQueue();
  const records = new Map<string, unknown>();
  const alarms = new Map<string, number | null>();
  let requests = 0;
  const world = {
    key,
    get state() {
      return state;
    },
    records,
    alarms,
    step(message: QueueMessage | AlarmMessage, now: number, asked = false): TurnResult<QueueState, unknown> {
      const context = { ...fixedContext(now, MQ_QUEUE_KIND, key), request_id: asked ? `req-${++requests}` : null };
      const result = stepQueue(state, message, context);
      state = result.state;
      for (const write of result.writes ?? []) {
        if (write.value === undefined) records.delete(write.subkey);
        else records.set(write.subkey, structuredClone(write.value));
      }
      for (const alarm of result.alarms ?? []) alarms.set(alarm.name, alarm.due_ms);
      return result;
    },
    send(now: number, body = 'hello', extra: Partial<Extract<QueueMessage, { op: 'send' }>> = {}) {
      return world.step({ op: 'send', body, attributes: {}, ...extra }, now).reply as { message_id: string; duplicate: boolean };
    },
    receive(now: number, max_messages = 10, visibility_timeout_seconds?: number) {
      return world.step({ op: 'receive', max_messages, wait_ms: 0, visibility_timeout_seconds }, now).reply as ReceivedMessage[];
    },
    remove(now: number, receipt_handle: string) {
      return world.step({ op: 'delete-message', receipt_handle }, now);
    },
    /** A restart: the state rebuilt from the records alone. */
    reload() {
      state = loadQueue(key, [...records.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    },
  };
  world.step({ op: 'create', name, settings: settings(options) }, T0);
  return world;
}

describe('mq queue: visibility and receive_count', () => {
  it('a received message is invisible for the visibility timeout, then received again with a new handle', () => {
    const q = queueWorld();
    const { message_id } = q.send(T0);
    const [first] = q.receive(T0 + 1);
    expect(first).toMatchObject({ message_id, body: 'hello', receive_count: 1 });
    expect(q.receive(T0 + 2)).toEqual([]);
    expect(q.receive(T0 + 1 + 29_999)).toEqual([]);
    const [second] = q.receive(T0 + 1 + 30_000);
    expect(second).toMatchObject({ message_id, receive_count: 2 });
    expect(second.receipt_handle).not.toBe(first.receipt_handle);
    // The stale handle deletes nothing; the latest one deletes the message.
    expect(codeOf(() => q.remove(T0 + 30_002, first.receipt_handle))).toBe('mq_receipt_handle_invalid');
    q.remove(T0 + 30_002, second.receipt_handle);
    expect(q.state.messages.size).toBe(0);
    expect(codeOf(() => q.remove(T0 + 30_003, second.receipt_handle))).toBe('mq_receipt_handle_invalid');
  });

  it('a receive may set its own visibility timeout; change-visibility moves it, 0 makes the message visible at once', () => {
    const q = queueWorld();
    q.send(T0);
    const [message] = q.receive(T0, 1, 5);
    expect(q.receive(T0 + 4_999)).toEqual([]);
    const changed = q.step({ op: 'change-visibility', receipt_handle: message.receipt_handle, visibility_timeout_seconds: 60 }, T0 + 4_999).reply;
    expect(changed).toMatchObject({ visible_at: T0 + 4_999 + 60_000 });
    expect(q.receive(T0 + 10_000)).toEqual([]);
    q.step({ op: 'change-visibility', receipt_handle: message.receipt_handle, visibility_timeout_seconds: 0 }, T0 + 10_000);
    const [again] = q.receive(T0 + 10_000);
    expect(again.receive_count).toBe(2);
    // Not in flight any more once its timeout passed.
    expect(codeOf(() => q.step({ op: 'change-visibility', receipt_handle: again.receipt_handle, visibility_timeout_seconds: 10 }, T0 + 50_000))).toBe('mq_message_not_in_flight');
    expect(codeOf(() => q.step({ op: 'change-visibility', receipt_handle: message.receipt_handle, visibility_timeout_seconds: 10 }, T0 + 10_001))).toBe('mq_receipt_handle_invalid');
  });

  it('delay: a message is invisible until its delay ends (per message, or the queue default)', () => {
    const q = queueWorld('delayed', { delay_seconds: 10 });
    q.send(T0, 'queue-default');
    q.send(T0, 'own-delay', { delay_seconds: 2 });
    expect(q.receive(T0 + 1_999)).toEqual([]);
    expect(q.receive(T0 + 2_000).map((m) => m.body)).toEqual(['own-delay']);
    expect(q.receive(T0 + 10_000).map((m) => m.body)).toEqual(['queue-default']);
  });

  it('statistics count visible, in-flight and delayed messages and the oldest age', () => {
    const q = queueWorld();
    q.send(T0, 'a');
    q.send(T0 + 1_000, 'b');
    q.send(T0 + 1_000, 'c', { delay_seconds: 60 });
    q.receive(T0 + 2_000, 1);
    const detail = q.step({ op: 'get' }, T0 + 5_000).reply as { statistics: Record<string, number> };
    expect(detail.statistics).toEqual({ approximate_message_count: 1, approximate_not_visible_count: 1, approximate_delayed_count: 1, oldest_message_age_seconds: 5 });
  });

  it('receive_count counts every receive exactly, across redeliveries and reloads (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.constant('send' as const), fc.constant('receive' as const), fc.constant('wait' as const), fc.constant('delete' as const), fc.constant('reload' as const)), { maxLength: 60 }),
        (ops) => {
          const q = queueWorld();
          let now = T0;
          const received = new Map<string, number>();
          const handles = new Map<string, string>();
          for (const op of ops) {
            now += 1;
            if (op === 'send') q.send(now);
            else if (op === 'wait') now += 30_000;
            else if (op === 'reload') q.reload();
            else if (op === 'receive') {
              for (const message of q.receive(now, 3)) {
                const count = (received.get(message.message_id) ?? 0) + 1;
                received.set(message.message_id, count);
                handles.set(message.message_id, message.receipt_handle);
                expect(message.receive_count).toBe(count);
              }
            } else {
              const first = [...handles.entries()][0];
              if (first) {
                // The latest handle deletes unless the message was received again (then it is stale).
                const code = codeOf(() => q.remove(now, first[1]));
                expect(code).toBeUndefined();
                handles.delete(first[0]);
              }
            }
          }
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('mq queue: FIFO', () => {
  it('keeps order per group and holds a group while one of its messages is in flight', () => {
    const q = queueWorld('jobs.fifo', { fifo: true });
    q.send(T0, 'a1', { group_id: 'A' });
    q.send(T0, 'b1', { group_id: 'B' });
    q.send(T0, 'a2', { group_id: 'A' });
    const [a1] = q.receive(T0, 1);
    expect(a1.body).toBe('a1');
    expect(q.receive(T0, 1).map((m) => m.body)).toEqual(['b1']);
    // Group A waits for a1: a2 is not handed out while a1 is in flight.
    expect(q.receive(T0, 10)).toEqual([]);
    q.remove(T0, a1.receipt_handle);
    expect(q.receive(T0, 10).map((m) => m.body)).toEqual(['a2']);
  });

  it('a batch takes a group\'s messages in order; an expired visibility gives the group back from its first message', () => {
    const q = queueWorld('batch.fifo', { fifo: true });
    for (const body of ['1', '2', '3']) q.send(T0, body, { group_id: 'g' });
    expect(q.receive(T0, 2).map((m) => m.body)).toEqual(['1', '2']);
    expect(q.receive(T0 + 30_000, 10).map((m) => [m.body, m.receive_count])).toEqual([
      ['1', 2],
      ['2', 2],
      ['3', 1],
    ]);
  });

  it('never hands out a message while an earlier one of its group is still queued (property)', () => {
    type Op = { type: 'send'; group: string } | { type: 'receive'; max: number } | { type: 'delete' } | { type: 'wait' } | { type: 'reload' };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ type: fc.constant('send' as const), group: fc.constantFrom('A', 'B', 'C') }),
      fc.record({ type: fc.constant('receive' as const), max: fc.integer({ min: 1, max: 10 }) }),
      fc.constant({ type: 'delete' as const }),
      fc.constant({ type: 'wait' as const }),
      fc.constant({ type: 'reload' as const }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
        const q = queueWorld('prop.fifo', { fifo: true });
        let now = T0;
        let counter = 0;
        // Per group, the bodies still in the queue, in send order.
        const queued = new Map<string, string[]>();
        const handles: { group: string; body: string; handle: string }[] = [];
        for (const step of ops) {
          now += 1;
          if (step.type === 'send') {
            const body = `${step.group}-${++counter}`;
            q.send(now, body, { group_id: step.group });
            queued.set(step.group, [...(queued.get(step.group) ?? []), body]);
          } else if (step.type === 'wait') now += 30_000;
          else if (step.type === 'reload') q.reload();
          else if (step.type === 'receive') {
            const received = q.receive(now, step.max);
            const perGroup = new Map<string, string[]>();
            for (const message of received) perGroup.set(message.group_id!, [...(perGroup.get(message.group_id!) ?? []), message.body]);
            // A group's batch is a prefix of what it still holds: nothing is skipped or out of order.
            for (const [group, bodies] of perGroup) expect(bodies).toEqual((queued.get(group) ?? []).slice(0, bodies.length));
            for (const message of received) {
              const index = handles.findIndex((h) => h.body === message.body);
              if (index >= 0) handles.splice(index, 1);
              handles.push({ group: message.group_id!, body: message.body, handle: message.receipt_handle });
            }
          } else if (handles.length > 0) {
            const { group, body, handle } = handles.shift()!;
            if (codeOf(() => q.remove(now, handle)) === undefined) queued.set(group, queued.get(group)!.filter((b) => b !== body));
          }
        }
      }),
      { numRuns: 150 },
    );
  });

  it('de-duplicates on deduplication_id for 5 minutes, even after the first was deleted', () => {
    const q = queueWorld('dedup.fifo', { fifo: true });
    const first = q.send(T0, 'x', { group_id: 'g', deduplication_id: 'd1' });
    const again = q.send(T0 + 299_999, 'x', { group_id: 'g', deduplication_id: 'd1' });
    expect(again).toEqual({ message_id: first.message_id, duplicate: true });
    expect(q.state.messages.size).toBe(1);
    const [message] = q.receive(T0 + 300_000);
    q.remove(T0 + 300_000, message.receipt_handle);
    const later = q.send(T0 + 300_000, 'x', { group_id: 'g', deduplication_id: 'd1' });
    expect(later.duplicate).toBe(false);
    expect(later.message_id).not.toBe(first.message_id);
  });

  it('de-duplication survives a reload', () => {
    const q = queueWorld('reload.fifo', { fifo: true });
    const first = q.send(T0, 'x', { group_id: 'g', deduplication_id: 'd1' });
    q.reload();
    expect(q.send(T0 + 1_000, 'x', { group_id: 'g', deduplication_id: 'd1' })).toEqual({ message_id: first.message_id, duplicate: true });
  });

  it('refuses FIFO fields on a standard queue and a missing group_id or a per-message delay on a FIFO one', () => {
    const standard = queueWorld();
    expect(codeOf(() => standard.send(T0, 'x', { group_id: 'g' }))).toBe('BAD_REQUEST');
    expect(codeOf(() => standard.send(T0, 'x', { deduplication_id: 'd' }))).toBe('BAD_REQUEST');
    const fifo = queueWorld('f.fifo', { fifo: true });
    expect(codeOf(() => fifo.send(T0, 'x'))).toBe('BAD_REQUEST');
    expect(codeOf(() => fifo.send(T0, 'x', { group_id: 'g', delay_seconds: 5 }))).toBe('BAD_REQUEST');
  });
});

describe('mq queue: dead-letter queue', () => {
  it('after max_receive_count receives, the next receive moves the message to the dead-letter queue', () => {
    const q = queueWorld('source', { max_receive_count: 2, dead_letter_queue: 'dlq' });
    const { message_id } = q.send(T0, 'poison');
    expect(q.receive(T0)[0].receive_count).toBe(1);
    expect(q.receive(T0 + 30_000)[0].receive_count).toBe(2);
    const result = q.step({ op: 'receive', max_messages: 10, wait_ms: 0 }, T0 + 60_000);
    expect(result.reply).toEqual([]);
    expect(q.state.messages.size).toBe(0);
    expect(result.sends).toEqual([
      { kind: MQ_QUEUE_KIND, key: mqQueueKey('tenant-1', 'dlq'), message: { op: 'dead-letter', source_queue: 'source', copy: expect.objectContaining({ message_id, body: 'poison', receive_count: 2 }) } },
    ]);

    // The dead-letter queue takes it as a new message (receive_count from 0), keeping its id and sent_at.
    const dlq = queueWorld('dlq');
    dlq.step(result.sends![0].message as QueueMessage, T0 + 60_001);
    const [moved] = dlq.receive(T0 + 60_002);
    expect(moved).toMatchObject({ message_id, body: 'poison', receive_count: 1, sent_at: T0 });
  });

  it('a dead-letter queue that does not exist sends the message back, and it is received at its source again', () => {
    const q = queueWorld('source', { max_receive_count: 1, dead_letter_queue: 'missing' });
    q.send(T0, 'poison');
    q.receive(T0);
    const moved = q.step({ op: 'receive', max_messages: 1, wait_ms: 0 }, T0 + 30_000);
    const missing = { ...fixedContext(T0, MQ_QUEUE_KIND, mqQueueKey('tenant-1', 'missing')), request_id: null };
    const refused = stepQueue(emptyQueue(), moved.sends![0].message as QueueMessage, missing);
    expect(refused.sends).toEqual([{ kind: MQ_QUEUE_KIND, key: q.key, message: expect.objectContaining({ op: 'dead-letter-refused' }) }]);
    q.step(refused.sends![0].message as QueueMessage, T0 + 30_001);
    const [back] = q.receive(T0 + 30_002);
    expect(back).toMatchObject({ body: 'poison', receive_count: 2 });
    // From now on it is received like any message, not moved again.
    expect(q.receive(T0 + 60_003)[0].receive_count).toBe(3);
  });
});

describe('mq queue: long polling', () => {
  it('a waiting receive is answered by the send that brings a message, in the send\'s turn', () => {
    const q = queueWorld();
    const waiting = q.step({ op: 'receive', max_messages: 5, wait_ms: 8_000 }, T0, true);
    expect(waiting.defer).toBe(true);
    expect(q.alarms.get('wake')).toBe(T0 + 8_000);
    const sent = q.step({ op: 'send', body: 'ping', attributes: {} }, T0 + 10);
    expect(sent.replies).toEqual([{ request_id: 'req-1', reply: [expect.objectContaining({ body: 'ping', receive_count: 1 })] }]);
    expect(q.state.waiters).toEqual([]);
  });

  it('answers an empty list at the deadline (the wake alarm)', () => {
    const q = queueWorld();
    q.step({ op: 'receive', max_messages: 1, wait_ms: 5_000 }, T0, true);
    const early = q.step({ op: '$alarm', name: 'wake', due_ms: T0 + 4_000 }, T0 + 4_000);
    expect(early.replies).toEqual([]);
    const due = q.step({ op: '$alarm', name: 'wake', due_ms: T0 + 5_000 }, T0 + 5_000);
    expect(due.replies).toEqual([{ request_id: 'req-1', reply: [] }]);
  });

  it('a waiting receive gets a message whose visibility runs out while it waits', () => {
    const q = queueWorld();
    q.send(T0);
    q.receive(T0, 1, 3);
    q.step({ op: 'receive', max_messages: 1, wait_ms: 8_000 }, T0 + 1, true);
    expect(q.alarms.get('wake')).toBe(T0 + 3_000);
    const woke = q.step({ op: '$alarm', name: 'wake', due_ms: T0 + 3_000 }, T0 + 3_000);
    expect(woke.replies).toEqual([{ request_id: 'req-1', reply: [expect.objectContaining({ receive_count: 2 })] }]);
  });

  it('await-message answers available without receiving; waits are capped below the runtime\'s deferred limit', () => {
    const q = queueWorld();
    q.step({ op: 'await-message', wait_ms: 60_000 }, T0, true);
    expect(q.alarms.get('wake')).toBe(T0 + 8_000);
    const sent = q.step({ op: 'send', body: 'x', attributes: {} }, T0 + 1);
    expect(sent.replies).toEqual([{ request_id: 'req-1', reply: { available: true } }]);
    expect(q.state.messages.get(1)!.receive_count).toBe(0);
  });

  it('waiters are memory only: a reload has none, and deleting the queue answers them not found', () => {
    const q = queueWorld();
    q.step({ op: 'receive', max_messages: 1, wait_ms: 8_000 }, T0, true);
    q.reload();
    expect(q.state.waiters).toEqual([]);
    q.step({ op: 'receive', max_messages: 1, wait_ms: 8_000 }, T0, true);
    const deleted = q.step({ op: 'delete' }, T0 + 1);
    expect(deleted.replies).toEqual([{ request_id: 'req-2', error: expect.objectContaining({ code: 'mq_queue_not_found' }) }]);
  });
});

describe('mq queue: retention, purge, limits, lifecycle', () => {
  it('the sweep alarm drops messages past retention; expired ones are never received', () => {
    const q = queueWorld('short', { message_retention_minutes: 1 });
    q.send(T0, 'old');
    q.send(T0 + 30_000, 'new');
    expect(q.alarms.get('sweep')).toBe(T0 + 60_000);
    q.step({ op: '$alarm', name: 'sweep', due_ms: T0 + 60_000 }, T0 + 60_000);
    expect([...q.state.messages.values()].map((m) => m.body)).toEqual(['new']);
    expect(q.alarms.get('sweep')).toBe(T0 + 90_000);
    expect(q.receive(T0 + 90_000)).toEqual([]);
  });

  it('purge deletes every message and says how many', () => {
    const q = queueWorld();
    q.send(T0);
    q.send(T0);
    q.receive(T0, 1);
    expect(q.step({ op: 'purge' }, T0).reply).toEqual({ messages_purged: 2 });
    expect(q.receive(T0 + 60_000)).toEqual([]);
    expect([...q.records.keys()].filter((key) => key.startsWith('m:') || key.startsWith('r:'))).toEqual([]);
  });

  /** A redrive as the route makes it (an ask), then the destination's answer to its check: the turn that moves, or refuses. */
  function redrive(q: ReturnType<typeof queueWorld>, destination: string, max_messages: number, now: number, destinationAnswer: { ok: true } | { ok: false; code: string }) {
    const asked = q.step({ op: 'redrive', destination, max_messages }, now, true);
    expect(asked.defer).toBe(true);
    expect(asked.sends).toEqual([
      {
        kind: MQ_QUEUE_KIND,
        key: mqQueueKey('tenant-1', destination),
        message: { op: 'flow-call', call: { op: 'redrive-destination' }, reply_to: { kind: MQ_QUEUE_KIND, key: q.key, flow_id: expect.any(String), step: 'redrive-destination' } },
      },
    ]);
    const flow_id = (asked.sends![0].message as { reply_to: { flow_id: string } }).reply_to.flow_id;
    const answer: QueueMessage = destinationAnswer.ok
      ? { op: 'flow-answer', flow_id, step: 'redrive-destination', ok: true, reply: { queue_id: 'q_dest', fifo: false } }
      : { op: 'flow-answer', flow_id, step: 'redrive-destination', ok: false, error: { code: destinationAnswer.code as 'mq_queue_not_found', message: 'No queue.' } };
    return { asked, answered: q.step(answer, now), answer };
  }

  it('redrive moves the messages not in flight, oldest first, up to max_messages, as dead-letter moves to the destination', () => {
    const q = queueWorld('orders-dlq');
    const ids = [q.send(T0, 'a').message_id, q.send(T0 + 1, 'b').message_id, q.send(T0 + 2, 'c').message_id];
    const [held] = q.receive(T0 + 3, 1, 600);
    expect(held.message_id).toBe(ids[0]);
    const first = redrive(q, 'orders', 1, T0 + 4, { ok: true });
    // Nothing moves before the destination answered.
    expect(first.asked.writes?.filter((write) => write.subkey.startsWith('m:'))).toEqual([]);
    expect(first.answered.replies).toEqual([{ request_id: 'req-1', reply: { moved: 1, remaining: 2 } }]);
    expect(first.answered.sends).toEqual([
      { kind: MQ_QUEUE_KIND, key: mqQueueKey('tenant-1', 'orders'), message: { op: 'dead-letter', source_queue: 'orders-dlq', copy: expect.objectContaining({ message_id: ids[1], body: 'b' }) } },
    ]);
    // A repeated answer does nothing.
    expect(q.step(first.answer, T0 + 4).sends ?? []).toEqual([]);
    expect(redrive(q, 'orders', 10, T0 + 5, { ok: true }).answered.replies).toEqual([{ request_id: 'req-2', reply: { moved: 1, remaining: 1 } }]);
    // The held one, once its visibility ran out, moves too.
    expect(redrive(q, 'orders', 10, T0 + 601_000, { ok: true }).answered.replies).toEqual([{ request_id: 'req-3', reply: { moved: 1, remaining: 0 } }]);
    q.reload();
    expect(q.receive(T0 + 602_000)).toEqual([]);
    expect([...q.records.keys()].filter((key) => key.startsWith('x:'))).toEqual([]);
    expect(codeOf(() => q.step({ op: 'redrive', destination: 'orders-dlq', max_messages: 1 }, T0))).toBe('BAD_REQUEST');
  });

  it('redrive to a destination that does not exist answers mq_queue_not_found and moves nothing', () => {
    const q = queueWorld('lost-dlq');
    q.send(T0, 'a');
    const { answered } = redrive(q, 'nowhere', 10, T0 + 1, { ok: false, code: 'mq_queue_not_found' });
    expect(answered.replies).toEqual([
      { request_id: 'req-1', error: { code: 'mq_queue_not_found', message: expect.stringMatching(/"nowhere" does not exist/), details: [{ field: 'body.destination', message: 'does not exist' }] } },
    ]);
    expect(answered.sends ?? []).toEqual([]);
    expect(q.state.messages.size).toBe(1);
    expect([...q.records.keys()].filter((key) => key.startsWith('x:'))).toEqual([]);
  });

  it('the destination checks only that it exists; one deleted after its answer sends each message back', () => {
    const destination = queueWorld('orders');
    const check = destination.step({ op: 'flow-call', call: { op: 'redrive-destination' }, reply_to: { kind: MQ_QUEUE_KIND, key: 'src', flow_id: 'rd_1', step: 'redrive-destination' } }, T0);
    expect(check.sends).toEqual([{ kind: MQ_QUEUE_KIND, key: 'src', message: { op: 'flow-answer', flow_id: 'rd_1', step: 'redrive-destination', ok: true, reply: { queue_id: expect.any(String), fifo: false } } }]);
    destination.step({ op: 'delete' }, T0 + 1);
    const gone = destination.step({ op: 'flow-call', call: { op: 'redrive-destination' }, reply_to: { kind: MQ_QUEUE_KIND, key: 'src', flow_id: 'rd_2', step: 'redrive-destination' } }, T0 + 2);
    expect(gone.sends).toEqual([{ kind: MQ_QUEUE_KIND, key: 'src', message: expect.objectContaining({ op: 'flow-answer', ok: false, error: expect.objectContaining({ code: 'mq_queue_not_found' }) }) }]);
    // The moved copy then finds no queue: it goes back to its source.
    const copy = { message_id: 'msg_1', body: 'a', attributes: {}, sent_at: T0, group_id: null, receive_count: 0 };
    expect(destination.step({ op: 'dead-letter', source_queue: 'orders-dlq', copy }, T0 + 3).sends).toEqual([
      { kind: MQ_QUEUE_KIND, key: mqQueueKey('tenant-1', 'orders-dlq'), message: { op: 'dead-letter-refused', copy, reason: expect.any(String) } },
    ]);
  });

  it('a redrive survives a reload while it waits; deleting the queue answers it not found and its late answer moves nothing', () => {
    const q = queueWorld('orders-dlq');
    q.send(T0, 'a');
    const asked = q.step({ op: 'redrive', destination: 'orders', max_messages: 10 }, T0 + 1, true);
    const flow_id = (asked.sends![0].message as { reply_to: { flow_id: string } }).reply_to.flow_id;
    q.reload();
    const ok: QueueMessage = { op: 'flow-answer', flow_id, step: 'redrive-destination', ok: true, reply: { queue_id: 'q_dest', fifo: false } };
    // After a restart the ask is gone (flow_interrupted) but the flow ends: the message moves.
    const moved = q.step(ok, T0 + 2);
    expect(moved.replies ?? []).toEqual([]);
    expect(moved.sends).toHaveLength(1);

    q.send(T0 + 3, 'b');
    const second = q.step({ op: 'redrive', destination: 'orders', max_messages: 10 }, T0 + 4, true);
    const second_flow = (second.sends![0].message as { reply_to: { flow_id: string } }).reply_to.flow_id;
    const deleted = q.step({ op: 'delete' }, T0 + 5);
    expect(deleted.replies).toEqual([{ request_id: 'req-2', error: expect.objectContaining({ code: 'mq_queue_not_found' }) }]);
    expect(deleted.writes).toContainEqual({ subkey: 'x:' + second_flow, value: undefined });
    const late = q.step({ ...ok, flow_id: second_flow }, T0 + 6);
    expect(late.sends ?? []).toEqual([]);
    expect(late.replies ?? []).toEqual([]);
  });

  it('create is idempotent with the same settings, 409 with others; delete forgets everything but the revision', () => {
    const q = queueWorld();
    expect(q.step({ op: 'create', name: 'orders', settings: settings() }, T0 + 1).reply).toMatchObject({ created: false });
    expect(codeOf(() => q.step({ op: 'create', name: 'orders', settings: settings({ delay_seconds: 5 }) }, T0 + 1))).toBe('mq_queue_exists');
    q.send(T0);
    q.step({ op: 'delete' }, T0 + 2);
    expect([...q.records.keys()]).toEqual(['v']);
    expect(codeOf(() => q.send(T0 + 3))).toBe('mq_queue_not_found');
    expect(codeOf(() => q.step({ op: 'create', name: 'orders', settings: settings({ dead_letter_queue: 'orders', max_receive_count: 1 }) }, T0))).toBe('BAD_REQUEST');
  });

  it('a full queue refuses sends with mq_queue_full', () => {
    const q = queueWorld();
    // Stand-in for 100k messages: the bytes bound.
    q.state.bytes = 256 * 1024 * 1024 - 3;
    expect(codeOf(() => q.send(T0, 'four'))).toBe('mq_queue_full');
    expect(codeOf(() => q.send(T0, 'two'))).toBeUndefined();
  });

  it('a reload rebuilds messages, in-flight state and receipt handles from the records', () => {
    const q = queueWorld();
    q.send(T0, 'a');
    q.send(T0, 'b');
    const [a] = q.receive(T0, 1);
    // A receive rewrites the small delivery record, not the message.
    expect(q.step({ op: 'receive', max_messages: 1, wait_ms: 0 }, T0).writes!.map((w) => w.subkey)).toEqual(['r:000000000000002']);
    q.step({ op: 'change-visibility', receipt_handle: [...q.state.messages.values()][1].receipt!, visibility_timeout_seconds: 0 }, T0);
    q.reload();
    expect(q.receive(T0 + 1).map((m) => m.body)).toEqual(['b']);
    q.remove(T0 + 2, a.receipt_handle);
    expect([...q.state.messages.values()].map((m) => m.body)).toEqual(['b']);
  });
});
