import { uniformInt } from 'pure-rand/distribution/uniformInt';
import { mersenne } from 'pure-rand/generator/mersenne';

/**
 * Seeded chance rolls (pure-rand's Mersenne Twister MT19937, seeded with a
 * 32-bit integer): the same seed and chances always give the same outcomes,
 * so a craft's recorded seed replays it. (Not xoroshiro128+: seeded with
 * neighbouring small integers, its first draws are far from uniform; MT's
 * seeding spreads them, test/unit/items.test.ts checks it.) Every chance takes one draw, in order,
 * even a chance of 1, so adding a certain output never shifts the others.
 * A draw is an integer in [0, 1e6); the roll succeeds when it is below
 * round(chance * 1e6), so chances count to six decimal places.
 */
export const CHANCE_RESOLUTION = 1_000_000;
export const SEED_MAX = 0xffff_ffff;

export function rollChances(seed: number, chances: readonly number[]): boolean[] {
  const rng = mersenne(seed | 0);
  return chances.map((chance) => uniformInt(rng, 0, CHANCE_RESOLUTION - 1) < Math.round(chance * CHANCE_RESOLUTION));
}
