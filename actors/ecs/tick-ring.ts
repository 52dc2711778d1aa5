import { TICK_RING_BYTES_MAX, TICK_RING_TICKS_MAX, TICKS_PER_REPLY_MAX, type TickRecord } from './messages.js';

/**
 * The bounded ring of recent ticks, pure. Ticks are kept in ascending order
 * without holes; the oldest go first when the ring holds more than
 * TICK_RING_TICKS_MAX ticks or TICK_RING_BYTES_MAX bytes (the newest stays).
 */

/** Appends `record` and returns the ticks that fell out of the ring (oldest first). */
export function pushTick(ring: TickRecord[], record: TickRecord, limits = { ticks: TICK_RING_TICKS_MAX, bytes: TICK_RING_BYTES_MAX }): TickRecord[] {
  ring.push(record);
  let bytes = 0;
  for (const entry of ring) bytes += entry.bytes;
  const evicted: TickRecord[] = [];
  while (ring.length > 1 && (ring.length > limits.ticks || bytes > limits.bytes)) {
    const dropped = ring.shift()!;
    bytes -= dropped.bytes;
    evicted.push(dropped);
  }
  return evicted;
}

/** The last tick a reader can resume after: every tick after it is in the ring. */
export function oldestResumableTick(ring: readonly TickRecord[], currentTick: number): number {
  return ring.length > 0 ? ring[0]!.tick - 1 : currentTick;
}

export type TicksSince = { gap: true } | { gap: false; ticks: TickRecord[] };

/** Ticks after `since` (at most `max`), or a gap when some of them already left the ring. */
export function ticksSince(ring: readonly TickRecord[], currentTick: number, since: number, max = TICKS_PER_REPLY_MAX): TicksSince {
  if (since >= currentTick) return { gap: false, ticks: [] };
  if (since < oldestResumableTick(ring, currentTick)) return { gap: true };
  const first = ring.findIndex((entry) => entry.tick > since);
  return { gap: false, ticks: first < 0 ? [] : ring.slice(first, first + max) };
}
