import { isServiceError, type ActorSend, type RecordWrite, type ServiceError } from '../../runtime/index.js';
import { loadRoom, stepRoom, waitingRoomKey, type RoomMessage, type RoomState } from '../../actors/waiting-rooms/state.js';

/**
 * Drives the pure room step like the runtime does, without one: a fake clock,
 * a Map standing in for the actor's records, armed alarms delivered in due
 * order by advance(), and the outbox collected in `sent`.
 */
export const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

let idCounter = 0;

export class RoomDriver {
  now = T0;
  readonly key: string;
  state: RoomState;
  readonly records = new Map<string, unknown>();
  readonly alarms = new Map<string, number>();
  sent: ActorSend[] = [];
  lastWrites: RecordWrite[] = [];

  constructor(tenant = 'tenant-1', room_id = 'room-1') {
    this.key = waitingRoomKey(tenant, room_id);
    this.state = loadRoom(this.key, []);
  }

  context() {
    return { now: this.now, kind: 'waiting-room', key: this.key, request_id: null, newId: (prefix = '') => `${prefix}${++idCounter}` };
  }

  /** Runs one turn; returns its reply (throws its ServiceError). */
  send<Reply = any>(message: RoomMessage | { op: '$alarm'; name: string; due_ms: number }): Reply {
    const result = stepRoom(this.state, message as RoomMessage, this.context());
    this.state = result.state;
    this.lastWrites = result.writes ?? [];
    for (const write of this.lastWrites) {
      if (write.value === undefined) this.records.delete(write.subkey);
      else this.records.set(write.subkey, structuredClone(write.value));
    }
    for (const change of result.alarms ?? []) {
      if (change.due_ms === null) this.alarms.delete(change.name);
      else this.alarms.set(change.name, change.due_ms);
    }
    this.sent.push(...(result.sends ?? []));
    return result.reply as Reply;
  }

  /** The ServiceError a message is rejected with (fails if it succeeds). */
  error(message: RoomMessage): ServiceError {
    try {
      this.send(message);
    } catch (error) {
      if (isServiceError(error)) return error;
      throw error;
    }
    throw new Error(`expected ${message.op} to fail`);
  }

  /** Moves time forward, delivering every alarm that falls due on the way, in order. */
  advance(ms: number): void {
    const target = this.now + ms;
    for (;;) {
      let next: [string, number] | undefined;
      for (const entry of this.alarms) if (entry[1] <= target && (!next || entry[1] < next[1])) next = entry;
      if (!next) break;
      this.alarms.delete(next[0]);
      this.now = Math.max(this.now, next[1]);
      this.send({ op: '$alarm', name: next[0], due_ms: next[1] });
    }
    this.now = target;
  }

  /** Moves time without delivering alarms (reads must still be right). */
  skip(ms: number): void {
    this.now += ms;
  }

  /** Rebuilds the state from the stored records, as an activation after a restart does. */
  reload(): void {
    const sorted = [...this.records.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    this.state = loadRoom(this.key, sorted.map(([k, v]) => [k, structuredClone(v)] as [string, unknown]));
  }

  takeSent(): ActorSend[] {
    const sent = this.sent;
    this.sent = [];
    return sent;
  }
}

export function roomInput(overrides: Record<string, unknown> = {}) {
  return {
    capacity: 100,
    admission_rate: { batch_size: 10, interval_seconds: 60 },
    auto_admit: false,
    anti_gaming: { join_rate_limit_max_attempts: 0, join_rate_limit_window_seconds: 60, rejoin_cooldown_seconds: 0 },
    ...overrides,
  };
}

export function createRoom(driver: RoomDriver, overrides: Record<string, unknown> = {}) {
  return driver.send({ op: 'create', room_id: driver.state.room_id, input: roomInput(overrides), by: 'usr_owner' });
}
