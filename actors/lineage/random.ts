import { createHash } from 'node:crypto';
import { uniformInt } from 'pure-rand/distribution/uniformInt';
import { xoroshiro128plusFromState } from 'pure-rand/generator/xoroshiro128plus';

/**
 * The one source of chance in breeding: pure-rand's xoroshiro128plus, one
 * generator per (seed, trait). Its 128-bit state is the first 16 bytes of
 * SHA-256("lineage/v1" 0x00 seed 0x00 trait_id), read as four big-endian
 * signed 32-bit words. A generator per trait keeps a trait's draws
 * independent of the others (adding a trait to a species leaves the other
 * traits' outcomes for a seed unchanged), and only + - * are applied to the
 * draws, so the outcome is the same on every platform.
 */
export class TraitRandom {
  private readonly rng: ReturnType<typeof xoroshiro128plusFromState>;

  constructor(seed: string, trait_id: string) {
    const digest = createHash('sha256').update(`lineage/v1\u0000${seed}\u0000${trait_id}`).digest();
    const state: number[] = [digest.readInt32BE(0), digest.readInt32BE(4), digest.readInt32BE(8), digest.readInt32BE(12)];
    // An all-zero state would only ever produce zeros; SHA-256 practically never gives one, but be sure.
    if (!state.some((word) => word !== 0)) state[3] = 1;
    this.rng = xoroshiro128plusFromState(state);
  }

  /** An integer in [from, to], both included. */
  int(from: number, to: number): number {
    return uniformInt(this.rng, from, to);
  }

  /** A number in [0, 1) with 30 bits of resolution. */
  unit(): number {
    return uniformInt(this.rng, 0, 0x3fffffff) / 0x40000000;
  }

  /** Approximately standard normal: the Irwin-Hall sum of twelve uniforms minus six (no Math.log or Math.cos, which may differ across platforms). */
  normal(): number {
    let sum = 0;
    for (let i = 0; i < 12; i++) sum += this.unit();
    return sum - 6;
  }
}
