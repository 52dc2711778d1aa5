import { Packr } from 'msgpackr';
import type { LogEntry } from '../replication/partition-log.js';

/**
 * The messages inside Frames, and their encoding. Records are off so that a
 * frame decodes on its own, whatever was sent before it on the stream.
 */
const packr = new Packr({ useRecords: false });

export function encodeFrame(items: unknown[]): Buffer {
  return packr.pack(items);
}

export function decodeFrame(payload: Uint8Array): unknown[] {
  const items = packr.unpack(payload);
  if (!Array.isArray(items)) throw new Error('frame payload is not an array');
  return items;
}

/** Edge -> leader. `tell` messages get a reply too (ok or error), so the outbox can acknowledge. */
export interface ForwardRequest {
  id: number;
  kind: string;
  key: string;
  message: unknown;
  /** Outbox deliveries: the receiver de-duplicates on it. */
  message_id?: string;
}

export interface WireError {
  code: string;
  message: string;
  details?: unknown;
  retry_after_seconds?: number;
}

export type ForwardReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: WireError };

/** Leader -> follower. A snapshot is begin, chunks, end; the follower replaces the partition. */
export type ReplicateMessage =
  | { t: 'append'; entry: LogEntry }
  /** "My log ends at `at`": the follower acknowledges if its log ends there too, otherwise asks for a snapshot. */
  | { t: 'probe'; partition: number; epoch: number; at: { epoch: number; seq: number } }
  | { t: 'snapshot_begin'; partition: number; epoch: number }
  | { t: 'snapshot_chunk'; partition: number; epoch: number; records: [unknown[], unknown][] }
  | { t: 'snapshot_end'; partition: number; epoch: number; at: { epoch: number; seq: number } };

/** Follower -> leader. */
export type ReplicateReply =
  /** `epoch`: the leader epoch of the message acknowledged, so a leader ignores acks meant for an earlier leadership of its own. */
  | { t: 'ack'; partition: number; seq: number; epoch: number }
  | { t: 'stale_leader'; partition: number; fence: number }
  | { t: 'mismatch'; partition: number; seq: number };
