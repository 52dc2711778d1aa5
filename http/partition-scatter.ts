import { PARTITION_READ_LIMIT_MAX, PARTITION_READS_KIND, partitionReadsKey, type ActorClient, type GroupsRead, type PartitionRead, type SnapshotsRead } from '../runtime/index.js';

/**
 * Lists over every partition, from partition reads (runtime/partition-reads.ts):
 * one read per partition, each answered by the partition's leader, merged
 * here in key order. Read-only scatter-gathers: sending one again is safe.
 */

function readOf<R>(actors: ActorClient, p: number, read: PartitionRead): Promise<R> {
  return actors.ask<R>(PARTITION_READS_KIND, partitionReadsKey(p), read, { readOnly: true });
}

/**
 * Code point order, the order LMDB keeps strings in (by their UTF-8 bytes);
 * `<` on JavaScript strings compares UTF-16 code units, which differs for
 * characters beyond U+FFFF.
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (0xd800-0xdfff) stand for code points above every other code unit.
    const rank = (c: number) => (c >= 0xd800 && c <= 0xdfff ? c + 0x2000 : c >= 0xe000 ? c - 0x800 : c);
    return rank(x) - rank(y);
  }
  return a.length - b.length;
}

/** Per partition, how many entries one read asks for while merging a page. */
const CHUNK_MAX = 1_000;

export interface SnapshotsPage {
  /** [actor key, stored state] in key order. */
  entries: [string, unknown][];
  /** Every actor of the kind with the prefix, over all partitions. */
  total: number;
}

/**
 * The snapshot actors of `kind` whose key starts with `prefix`, in key order
 * over all partitions, skipping `offset` and taking `limit`. Each partition
 * is read in chunks and the chunks merged, so a deep page reads what it skips
 * once, never the whole set of every partition.
 */
export async function snapshotsPage(actors: ActorClient, partitionCount: number, kind: string, prefix: string, offset: number, limit: number): Promise<SnapshotsPage> {
  const chunk = Math.max(1, Math.min(CHUNK_MAX, offset + limit));
  const read = (p: number, after?: string) => readOf<SnapshotsRead>(actors, p, { op: 'snapshots', kind, prefix, after, limit: chunk });
  const firsts = await Promise.all(Array.from({ length: partitionCount }, (_, p) => read(p)));
  const total = firsts.reduce((sum, first) => sum + first.count, 0);
  const streams = firsts.map((first, p) => ({ p, buffer: first.entries, at: 0, more: first.entries.length === chunk }));
  const entries: [string, unknown][] = [];
  let skipped = 0;
  while (entries.length < limit) {
    let best: (typeof streams)[number] | undefined;
    for (const stream of streams) {
      if (stream.at === stream.buffer.length && stream.more) {
        // Refill on demand: only a stream whose head is needed is read further.
        const last = stream.buffer[stream.buffer.length - 1]![0];
        const next = await read(stream.p, last);
        stream.buffer = next.entries;
        stream.at = 0;
        stream.more = next.entries.length === chunk;
      }
      if (stream.at < stream.buffer.length && (best === undefined || compareCodePoints(stream.buffer[stream.at]![0], best.buffer[best.at]![0]) < 0)) best = stream;
    }
    if (best === undefined) break;
    const entry = best.buffer[best.at++]!;
    if (skipped < offset) skipped++;
    else entries.push(entry);
  }
  return { entries, total };
}

/**
 * Every group (see PartitionRead `groups`) of the snapshot actors of `kind`
 * under `prefix`, over all partitions, in name order, with their counts
 * added up.
 */
export async function snapshotGroups(actors: ActorClient, partitionCount: number, kind: string, prefix: string): Promise<{ group: string; count: number }[]> {
  const counts = new Map<string, number>();
  await Promise.all(
    Array.from({ length: partitionCount }, async (_, p) => {
      let after: string | undefined;
      for (;;) {
        const { groups } = await readOf<GroupsRead>(actors, p, { op: 'groups', kind, prefix, after, limit: PARTITION_READ_LIMIT_MAX });
        for (const { group, count } of groups) counts.set(group, (counts.get(group) ?? 0) + count);
        if (groups.length < PARTITION_READ_LIMIT_MAX) return;
        after = groups[groups.length - 1]!.group;
      }
    }),
  );
  return [...counts].map(([group, count]) => ({ group, count })).sort((a, b) => compareCodePoints(a.group, b.group));
}
