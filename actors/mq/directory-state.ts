import type { AlarmMessage, TurnContext, TurnResult } from '../../runtime/index.js';
import type { DirectoryEntry, DirectoryListView, DirectoryMessage } from './messages.js';

/**
 * The message-queue directory of one tenant (a `records` actor keyed
 * [tenant]): the index behind GET /api/v1/mq/queues and /topics. Queue and
 * topic actors keep it current through their outbox (`upsert` on create,
 * `remove` on delete), each change with the resource's revision, so a late
 * or repeated delivery never undoes a newer one (a removed name keeps its
 * last revision as a tombstone).
 *
 * Records:
 *   q:<name>  {entry, rev}   a live queue      Q:<name>  rev   a deleted queue's last revision
 *   t:<name>  {entry, rev}   a live topic      T:<name>  rev   a deleted topic's last revision
 */
type Kind = 'queue' | 'topic';

export interface DirectoryState {
  live: Record<Kind, Map<string, { entry: DirectoryEntry; rev: number }>>;
  tombstones: Record<Kind, Map<string, number>>;
}

const LIVE_PREFIX: Record<Kind, string> = { queue: 'q:', topic: 't:' };
const TOMBSTONE_PREFIX: Record<Kind, string> = { queue: 'Q:', topic: 'T:' };

export function emptyDirectory(): DirectoryState {
  return { live: { queue: new Map(), topic: new Map() }, tombstones: { queue: new Map(), topic: new Map() } };
}

export function loadDirectory(_key: string, records: Iterable<[string, unknown]>): DirectoryState {
  const state = emptyDirectory();
  for (const [subkey, value] of records) {
    const name = subkey.slice(2);
    for (const kind of ['queue', 'topic'] as const) {
      if (subkey.startsWith(LIVE_PREFIX[kind])) state.live[kind].set(name, value as { entry: DirectoryEntry; rev: number });
      else if (subkey.startsWith(TOMBSTONE_PREFIX[kind])) state.tombstones[kind].set(name, value as number);
    }
  }
  return state;
}

function lastRev(state: DirectoryState, kind: Kind, name: string): number {
  return state.live[kind].get(name)?.rev ?? state.tombstones[kind].get(name) ?? 0;
}

export function stepDirectory(state: DirectoryState, message: DirectoryMessage | AlarmMessage, _context: TurnContext): TurnResult<DirectoryState, unknown> {
  switch (message.op) {
    case '$alarm':
      return { state };

    case 'upsert': {
      const { type, entry, rev } = message;
      if (rev <= lastRev(state, type, entry.name)) return { state };
      state.live[type].set(entry.name, { entry, rev });
      const hadTombstone = state.tombstones[type].delete(entry.name);
      return {
        state,
        writes: [
          { subkey: LIVE_PREFIX[type] + entry.name, value: { entry, rev } },
          ...(hadTombstone ? [{ subkey: TOMBSTONE_PREFIX[type] + entry.name, value: undefined }] : []),
        ],
      };
    }

    case 'remove': {
      const { type, name, rev } = message;
      if (rev <= lastRev(state, type, name)) return { state };
      state.live[type].delete(name);
      state.tombstones[type].set(name, rev);
      return {
        state,
        writes: [
          { subkey: LIVE_PREFIX[type] + name, value: undefined },
          { subkey: TOMBSTONE_PREFIX[type] + name, value: rev },
        ],
      };
    }

    case 'list': {
      const q = message.q?.toLowerCase();
      const entries = [...state.live[message.type].values()].map((item) => item.entry).filter((entry) => !q || entry.name.toLowerCase().includes(q));
      const descending = message.sort_by.startsWith('-');
      const field = descending ? message.sort_by.slice(1) : message.sort_by;
      const byName = (a: DirectoryEntry, b: DirectoryEntry) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
      entries.sort((a, b) => {
        const order = field === 'created_at' ? a.created_at - b.created_at || byName(a, b) : byName(a, b);
        return descending ? -order : order;
      });
      const start = (Math.max(1, message.page) - 1) * message.page_size;
      return { state, reply: { total: entries.length, entries: entries.slice(start, start + message.page_size) } satisfies DirectoryListView };
    }
  }
}
