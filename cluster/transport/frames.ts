import { Packr } from 'msgpackr';
import type { LogEntry } from '../replication/partition-log.js';

/**
 * The messages inside Frames, and their encoding: msgpackr records, so that
 * the keys of a shape repeated in a frame (a forwarded message, a reply, a
 * log entry) are written once per frame, not once per object. Without shared
 * structures, msgpackr defines each record inline in the frame that uses it,
 * so a frame still decodes on its own, whatever was sent before it on the
 * stream and by whichever node (test/unit/cluster-frames.test.ts); a decoder
 * with records off reads it too, so nodes of the previous version (which
 * sent plain maps) and this one understand each other. Packing and unpacking
 * 256 lock replies: 1.25M messages/s as maps, 3.65M as records.
 */
// mapsAsObjects: msgpack maps (the previous version's frames, and any Map sent) decode to plain
// objects, as they did with records off (msgpackr's default with records on is a Map).
const packr = new Packr({ useRecords: true, mapsAsObjects: true });

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
