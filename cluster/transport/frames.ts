import { Packr } from 'msgpackr';
import type { LogEntry } from '../replication/partition-log.js';

/**
 * The messages inside Frames, and their encoding: msgpackr records (from
 * RECORDS_FROM_ITEMS items a frame), so that the keys of a shape repeated in
 * a frame (a forwarded message, a reply, a log entry) are written once per
 * frame, not once per object. Without shared
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
const mapsPackr = new Packr({ useRecords: false, mapsAsObjects: true });
/**
 * Frames of fewer items are written as plain maps. A record definition is
 * written and read again in every frame, so it pays only when its shape
 * repeats: under request load a frame carries 1-3 messages, and a 3-node
 * cluster (RF 2, fresh-key locks) ran 11% faster with small frames as maps
 * (medians 1,676 -> 1,865 acquires/s, ahead in 6 paired runs of 7;
 * docs/performance.md). Streaming frames of hundreds keep the records.
 */
export const RECORDS_FROM_ITEMS = 16;

/** `messages`: how many messages the items hold (a flat frame, forward-frames.ts, has several items per message). */
export function encodeFrame(items: unknown[], messages = items.length): Buffer {
  return (messages < RECORDS_FROM_ITEMS ? mapsPackr : packr).pack(items);
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
