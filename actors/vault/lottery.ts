import { createHmac } from 'node:crypto';

/**
 * The lottery's draw is fixed at creation and verifiable afterwards: the
 * server draws a 32-byte seed, publishes SHA-256(seed) as a leaf of the lock
 * proof (the commitment), and keeps the seed sealed until the result. Entry
 * number i (0-based, in purchase order) wins when
 *
 *   draw(i) = first 8 bytes of HMAC-SHA256(seed, "<attestation_id>:<i>"), as an unsigned big-endian integer, / 2^64
 *
 * is below odds_per_entry. The first winning entry unlocks the attestation;
 * the seed is revealed with the result, so anyone can recompute every draw
 * and the commitment.
 */
export function lotteryDraw(seed: Buffer, attestation_id: string, entry: number): number {
  const digest = createHmac('sha256', seed).update(`${attestation_id}:${entry}`).digest();
  return Number(digest.readBigUInt64BE(0)) / 2 ** 64;
}

/** The first winning entry below max_entries, or null. */
export function firstWinningEntry(seed: Buffer, attestation_id: string, odds_per_entry: number, max_entries: number): number | null {
  for (let entry = 0; entry < max_entries; entry++) {
    if (lotteryDraw(seed, attestation_id, entry) < odds_per_entry) return entry;
  }
  return null;
}

/** Draws computed between two yields of firstWinningEntryYielding: some 10 ms of CPU on this machine's cores. */
const DRAWS_PER_SLICE = 2_000;

/**
 * firstWinningEntry in slices, giving the event loop back between them: up to
 * 100,000 HMACs (max_entries) take about half a second, which, in one piece,
 * would hold every other request of the node for that long.
 */
export async function firstWinningEntryYielding(seed: Buffer, attestation_id: string, odds_per_entry: number, max_entries: number): Promise<number | null> {
  for (let start = 0; start < max_entries; start += DRAWS_PER_SLICE) {
    if (start > 0) await new Promise((resolve) => setImmediate(resolve));
    const end = Math.min(max_entries, start + DRAWS_PER_SLICE);
    for (let entry = start; entry < end; entry++) {
      if (lotteryDraw(seed, attestation_id, entry) < odds_per_entry) return entry;
    }
  }
  return null;
}

/** The chance, before the result is known, that one of `entries` entries wins: 1 - (1 - odds)^entries. */
export function winProbability(odds_per_entry: number, entries: number): number {
  if (entries <= 0) return 0;
  return 1 - (1 - odds_per_entry) ** entries;
}
