import type { AlarmChange, AlarmMessage } from './actor.js';
import { AlarmQueue } from './alarm-queue.js';
import { assert } from './assert.js';
import type { Clock, TimerHandle } from './clock.js';
import type { Limits } from './limits.js';
import type { PartitionTable } from './partition-table.js';
import { keys } from './storage-keys.js';
import type { Store, WriteOp } from './store.js';

/**
 * Durable alarms between the store and the turn loop. Every alarm is stored
 * twice (by actor, for the stale check; by due time, for loading); only those
 * due within `alarm_window_ms` are held in an in-memory min-heap, and the
 * window moves every quarter of its length, so a far-off alarm costs no RAM
 * and a restart re-arms without reading every alarm. Owns the window, the
 * heap, the one timer for the next due alarm, and the count of stored alarms.
 */

/** An alarm change as committed, with whether it replaced or removed a stored alarm. */
export interface AppliedAlarmChange extends AlarmChange {
  existed: boolean;
}

export interface AlarmWindowOptions {
  store: Store;
  clock: Clock;
  limits: Limits;
  partitions: PartitionTable;
  isRunning: () => boolean;
  /** Queues the alarm's turn; throws when the actor cannot take it now (mailbox full). */
  deliver: (kind: string, key: string, message: AlarmMessage) => void;
}

export class AlarmWindow {
  /** Durable alarms stored (all of them, not only the window in memory). */
  private storedCount = 0;
  /** Alarms due before this time are in the queue; later ones only in the store. */
  private windowEndMs = 0;
  private windowTimer?: TimerHandle;
  private readonly queue = new AlarmQueue();
  private timer?: TimerHandle;
  private timerFireMs = Infinity;

  constructor(private readonly options: AlarmWindowOptions) {}

  get pendingCount(): number {
    return this.storedCount;
  }

  get inMemoryCount(): number {
    return this.queue.size;
  }

  /** Counts the stored alarms of every served partition and loads the first window. */
  start(): void {
    const { partitions } = this.options;
    for (let p = 0; p < partitions.count; p++) if (partitions.owns(p)) this.storedCount += this.countStored(p);
    this.loadWindow(0);
  }

  /** Takes on partition p's alarms (count and those inside the window); the caller arms afterwards. */
  openPartition(p: number): void {
    this.storedCount += this.countStored(p);
    const [start, end] = keys.alarmDueRange(p, 0, this.windowEndMs);
    for (const { key } of this.options.store.range(start, end)) {
      const [, , due_ms, kind, actorKey, name] = key as [string, number, number, string, string, string];
      this.queue.push({ fire_ms: due_ms, due_ms, partition: p, kind, key: actorKey, name });
    }
  }

  /** Forgets partition p's alarms from the count (queued entries are skipped when they surface). */
  closePartition(p: number): void {
    this.storedCount -= this.countStored(p);
  }

  stop(): void {
    this.timer?.cancel();
    this.windowTimer?.cancel();
  }

  /** The due time a turn sees for alarm `name`: the batch's own earlier change wins over the store. */
  currentDue(pendingInBatch: Map<string, number | null> | undefined, partition: number, kind: string, key: string, name: string): unknown {
    return pendingInBatch?.has(name) ? pendingInBatch.get(name) : this.options.store.get(keys.alarm(partition, kind, key, name));
  }

  /** Adds the writes of one alarm change to a batch's ops and records it for applyChanges after commit. */
  stageChange(
    ops: WriteOp[],
    applied: AppliedAlarmChange[],
    pendingInBatch: Map<string, number | null>,
    partition: number,
    kind: string,
    key: string,
    change: AlarmChange,
  ): void {
    const storeKey = keys.alarm(partition, kind, key, change.name);
    const previous = pendingInBatch.has(change.name) ? pendingInBatch.get(change.name) : (this.options.store.get(storeKey) as number | undefined);
    if (previous !== undefined && previous !== null) ops.push({ type: 'del', key: keys.alarmByTime(partition, previous, kind, key, change.name) });
    if (change.due_ms === null) ops.push({ type: 'del', key: storeKey });
    else {
      assert(Number.isFinite(change.due_ms), 'alarm due time must be a finite number');
      ops.push({ type: 'put', key: storeKey, value: change.due_ms });
      ops.push({ type: 'put', key: keys.alarmByTime(partition, change.due_ms, kind, key, change.name), value: 1 });
    }
    pendingInBatch.set(change.name, change.due_ms);
    applied.push({ ...change, existed: previous !== undefined && previous !== null });
  }

  /** After the commit: counts the committed changes, schedules those inside the window, re-arms. */
  applyChanges(partition: number, kind: string, key: string, changes: readonly AppliedAlarmChange[]): void {
    for (const change of changes) {
      this.storedCount += (change.due_ms === null ? 0 : 1) - (change.existed ? 1 : 0);
      // Inside the window: schedule now. Later: the window will load it from the store.
      if (change.due_ms !== null && change.due_ms < this.windowEndMs) {
        this.queue.push({ fire_ms: change.due_ms, due_ms: change.due_ms, partition, kind, key, name: change.name });
      }
    }
    if (changes.length > 0) this.arm();
  }

  /** Sets the timer for the earliest queued alarm, unless one is already set as early. */
  arm(): void {
    if (!this.options.isRunning()) return;
    const next = this.queue.peek();
    if (!next) {
      this.timer?.cancel();
      this.timer = undefined;
      this.timerFireMs = Infinity;
      return;
    }
    if (this.timer && this.timerFireMs <= next.fire_ms) return;
    this.timer?.cancel();
    this.timerFireMs = next.fire_ms;
    this.timer = this.options.clock.setTimer(next.fire_ms - this.options.clock.now(), () => {
      this.timer = undefined;
      this.timerFireMs = Infinity;
      this.fireDue();
    });
  }

  private countStored(p: number): number {
    let count = 0;
    const [alarmStart, alarmEnd] = keys.alarmRange(p);
    for (const _ of this.options.store.range(alarmStart, alarmEnd)) count++;
    return count;
  }

  /**
   * Moves the window to now + alarm_window_ms, scheduling the stored alarms
   * it now covers, and re-arms itself. An alarm may end up in the queue
   * twice (committed just before a scan); the stale check at fire time and in
   * the turn drops the second.
   */
  private loadWindow(from_ms: number): void {
    const { store, clock, limits, partitions } = this.options;
    const until_ms = clock.now() + limits.alarm_window_ms;
    for (let p = 0; p < partitions.count; p++) {
      if (!partitions.owns(p)) continue;
      const [start, end] = keys.alarmDueRange(p, from_ms, until_ms);
      for (const { key } of store.range(start, end)) {
        const [, , due_ms, kind, actorKey, name] = key as [string, number, number, string, string, string];
        this.queue.push({ fire_ms: due_ms, due_ms, partition: p, kind, key: actorKey, name });
      }
    }
    this.windowEndMs = until_ms;
    this.windowTimer = clock.setTimer(limits.alarm_window_ms / 4, () => {
      if (!this.options.isRunning()) return;
      this.loadWindow(this.windowEndMs);
      this.arm();
    });
  }

  private fireDue(): void {
    const { store, clock, limits, partitions } = this.options;
    if (!this.options.isRunning()) return;
    const now = clock.now();
    for (let next = this.queue.peek(); next && next.fire_ms <= now; next = this.queue.peek()) {
      this.queue.pop();
      // A partition handed to another node: its new leader fires it.
      if (!partitions.owns(next.partition)) continue;
      if (store.get(keys.alarm(next.partition, next.kind, next.key, next.name)) !== next.due_ms) continue;
      try {
        this.options.deliver(next.kind, next.key, { op: '$alarm', name: next.name, due_ms: next.due_ms });
      } catch {
        // Mailbox full: try again shortly; the alarm stays durable meanwhile.
        this.queue.push({ ...next, fire_ms: now + limits.outbox_retry_delay_ms });
      }
    }
    this.arm();
  }
}
