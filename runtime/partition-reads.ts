import { ServiceError } from './errors.js';
import { keys } from './storage-keys.js';
import type { Store, StoreKey } from './store.js';

/**
 * Reads of what one partition stores, answered from the store by the node
 * that serves the partition, without an actor turn: the way an administrator
 * lists actors of a kind (a tenant's locks, say) without a directory actor
 * that every first write would have to tell.
 *
 * A read is addressed like an actor, kind PARTITION_READS_KIND with the
 * partition number as its key (partitionOf maps it to that partition), so
 * the cluster router forwards it to the partition's leader like any ask;
 * a list over every partition is a scatter-gather of such reads. What it
 * sees is what the partition has committed.
 *
 * Snapshot actors only (their state is one record under ['s', p, kind, key]).
 * Prefixes select actor keys by their leading characters; the project's actor
 * keys are JSON arrays (`["tenant","namespace","key"]`), so a prefix such as
 * `["usr_1",` selects one tenant's actors of the kind.
 */
export const PARTITION_READS_KIND = '$partition';

export function partitionReadsKey(p: number): string {
  return String(p);
}

/** The partition a PARTITION_READS_KIND key names, or undefined if it names none. */
export function partitionOfReadsKey(key: string, partitionCount: number): number | undefined {
  const p = Number(key);
  return Number.isSafeInteger(p) && p >= 0 && p < partitionCount && String(p) === key ? p : undefined;
}

export type PartitionRead =
  /**
   * Snapshot actors of `kind` whose key starts with `prefix`, in key order,
   * after the key `after` (exclusive) when given, at most `limit`; with the
   * number of all the prefix's actors in the partition.
   */
  | { op: 'snapshots'; kind: string; prefix: string; after?: string; limit: number }
  /**
   * Keys that are JSON arrays, grouped by their element after `prefix` (which
   * ends with the comma before it): each group's element (a string) and how
   * many actors it has, in key order, after the group `after` when given, at
   * most `limit` groups. One seek and one count per group, whatever the
   * groups hold.
   */
  | { op: 'groups'; kind: string; prefix: string; after?: string; limit: number };

export interface SnapshotsRead {
  entries: [key: string, state: unknown][];
  count: number;
}

export interface GroupsRead {
  groups: { group: string; count: number }[];
}

/** Reads beyond this many entries per answer are refused (a page is at most this). */
export const PARTITION_READ_LIMIT_MAX = 10_000;

/**
 * The first string after every string that starts with `prefix` (LMDB orders
 * strings by their UTF-8 bytes, which is code point order): `prefix` with its
 * last character incremented. Only for a last character below the surrogates.
 */
export function prefixEnd(prefix: string): string {
  const last = prefix.charCodeAt(prefix.length - 1);
  if (prefix.length === 0 || last >= 0xd7ff) throw new ServiceError('BAD_REQUEST', 'A read prefix must end with a character below U+D7FF.');
  return prefix.slice(0, -1) + String.fromCharCode(last + 1);
}

/** The JSON string at the start of `text` (`"a\"b",...` -> `"a\"b"`), or undefined. */
function leadingJsonString(text: string): string | undefined {
  if (text[0] !== '"') return undefined;
  for (let i = 1; i < text.length; i++) {
    const c = text[i];
    if (c === '\\') i++;
    else if (c === '"') return text.slice(0, i + 1);
  }
  return undefined;
}

function checkRead(read: PartitionRead): void {
  const valid =
    typeof read === 'object' &&
    read !== null &&
    (read.op === 'snapshots' || read.op === 'groups') &&
    typeof read.kind === 'string' &&
    typeof read.prefix === 'string' &&
    read.prefix.length > 0 &&
    Number.isSafeInteger(read.limit) &&
    read.limit >= 0 &&
    read.limit <= PARTITION_READ_LIMIT_MAX &&
    (read.after === undefined || typeof read.after === 'string');
  if (!valid) throw new ServiceError('BAD_REQUEST', 'Not a partition read.');
}

/** Answers a read of partition p from the store. */
export function readPartition(store: Store, p: number, read: PartitionRead): SnapshotsRead | GroupsRead {
  checkRead(read);
  const end = prefixEnd(read.prefix);
  const at = (actorKey: string): StoreKey => keys.snapshot(p, read.kind, actorKey);
  if (read.op === 'snapshots') {
    const entries: [string, unknown][] = [];
    if (read.limit > 0) {
      const start = read.after !== undefined && read.after > read.prefix ? read.after : read.prefix;
      for (const { key, value } of store.range(at(start), at(end))) {
        const actorKey = key[3] as string;
        if (actorKey === read.after) continue;
        entries.push([actorKey, value]);
        if (entries.length >= read.limit) break;
      }
    }
    return { entries, count: store.count(at(read.prefix), at(end)) };
  }
  const groups: { group: string; count: number }[] = [];
  let from = read.after === undefined ? read.prefix : prefixEnd(read.prefix + JSON.stringify(read.after) + ',');
  while (groups.length < read.limit) {
    let groupPrefix: string | undefined;
    let element: string | undefined;
    for (const { key } of store.range(at(from), at(end))) {
      const actorKey = key[3] as string;
      element = leadingJsonString(actorKey.slice(read.prefix.length));
      // A key whose next element is not a string, or is its last one, is in no group: look further.
      if (element !== undefined && actorKey.startsWith(read.prefix + element + ',')) {
        groupPrefix = read.prefix + element + ',';
        break;
      }
    }
    if (groupPrefix === undefined || element === undefined) break;
    const groupEnd = prefixEnd(groupPrefix);
    groups.push({ group: JSON.parse(element) as string, count: store.count(at(groupPrefix), at(groupEnd)) });
    from = groupEnd;
  }
  return { groups };
}
