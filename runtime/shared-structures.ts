import { keys } from './storage-keys.js';

/**
 * Which object shapes the store's msgpack encoder keeps in a table of its
 * own, so that a stored value carries only its field values.
 *
 * Without the table, msgpackr writes every object as a record whose
 * definition (all its field names) travels inside the value: a lock's
 * snapshot is 172 bytes, of which 107 are names. With it, the snapshot is
 * 65 bytes, the encoder builds no new definition per write, and a commit
 * writes fewer pages. Measured on the fresh-key lock write at a fixed rate
 * (docs/performance.md, "Shared record structures"): 4-14% less CPU per request.
 *
 * lmdb-js keeps the table under one key of the store and writes a new entry
 * in its own synchronous transaction before the value that uses it is
 * queued, so a value on disk never refers to a shape that is not. Values
 * written before the table existed carry their definitions and still decode.
 */

/** Where the table lives: node metadata, never replicated (each node encodes for its own store). */
export const SHARED_STRUCTURES_KEY = keys.meta('structures');

/**
 * How many shapes the table may hold. msgpackr refuses to open a table larger
 * than its limit, so this may be raised in a later version, never lowered.
 * Past it, new shapes are written as before, with their definitions inline.
 */
export const SHARED_STRUCTURES_MAX = 1024;

/** Field names as the code writes them (snake_case), not keys taken from data. */
const FIELD_NAME = /^[a-z][a-z0-9_]{0,39}$/;
const FIELDS_MAX = 48;

/**
 * Shares a shape only if it looks like a type of the code: a bounded number of
 * snake_case field names. Objects keyed by ids, emails or user-chosen keys
 * (a map of members, of counters) would each add a shape that is seldom seen
 * again, and each addition costs a synchronous commit; those stay inline.
 */
export function isSharedShape(keys: readonly string[]): boolean {
  if (keys.length > FIELDS_MAX) return false;
  for (const key of keys) if (!FIELD_NAME.test(key)) return false;
  return true;
}
