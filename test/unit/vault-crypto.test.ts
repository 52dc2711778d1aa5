import { createHash, createHmac, generateKeyPairSync, sign } from 'node:crypto';
import fc from 'fast-check';
import { combine, split } from 'shamir-secret-sharing';
import { describe, expect, it } from 'vitest';
import {
  buildLockProof,
  canonicalJson,
  firstWinningEntry,
  firstWinningEntryYielding,
  keyCommitment,
  lotteryCommitment,
  lotteryDraw,
  verifyWitnessSignature,
  winProbability,
  witnessMessage,
} from '../../actors/vault/messages.js';

/**
 * The vault's proofs, checked by independent verifiers written here from the
 * recipes in docs/api/vault.md ("Verifying"), not from the service's code.
 */

/** docs/api/vault.md: leaf = SHA-256(0x00 | label | 0x00 | value); node = SHA-256(0x01 | left | right); odd last node carried up. */
function independentRoot(leaves: { label: string; value: string }[]): string {
  const sha = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();
  let level: Buffer[] = leaves.map(({ label, value }) => sha(Buffer.from([0]), Buffer.from(label), Buffer.from([0]), Buffer.from(value)));
  while (level.length > 1) {
    const next: Buffer[] = [];
    for (let i = 0; i < level.length; i += 2) next.push(i + 1 < level.length ? sha(Buffer.from([1]), level[i], level[i + 1]) : level[i]);
    level = next;
  }
  return level[0].toString('hex');
}

describe('lock proof (Merkle tree over labelled leaves)', () => {
  it('matches the independent verifier for any number of leaves, and any change of a leaf changes the root', () => {
    fc.assert(
      fc.property(fc.array(fc.record({ label: fc.string({ maxLength: 20 }), value: fc.string({ maxLength: 40 }) }), { minLength: 1, maxLength: 17 }), fc.nat(), (leaves, pick) => {
        const proof = buildLockProof(leaves);
        expect(proof.merkle_root).toBe(independentRoot(leaves));
        proof.leaves.forEach((leaf, i) => expect(leaf.hash).toBe(independentRoot([leaves[i]])));
        const i = pick % leaves.length;
        const changed = leaves.map((leaf, j) => (j === i ? { ...leaf, value: `${leaf.value}!` } : leaf));
        expect(buildLockProof(changed).merkle_root).not.toBe(proof.merkle_root);
      }),
    );
  });

  it('canonical JSON sorts keys at every level', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { z: 1, y: null }], c: 'x' } })).toBe('{"a":{"c":"x","d":[2,{"y":null,"z":1}]},"b":1}');
  });
});

describe('holder shares (Shamir)', () => {
  it('any share_threshold shares rebuild the key (checked against its commitment); fewer do not', async () => {
    const key = createHash('sha256').update('a content key').digest();
    const commitment = keyCommitment('att_1', key);
    const shares = await split(new Uint8Array(key), 5, 3);
    for (const subset of [[0, 1, 2], [4, 2, 0], [1, 3, 4], [0, 1, 2, 3, 4]]) {
      const rebuilt = Buffer.from(await combine(subset.map((i) => shares[i])));
      expect(keyCommitment('att_1', rebuilt)).toBe(commitment);
    }
    const short = Buffer.from(await combine([shares[0], shares[3]]));
    expect(keyCommitment('att_1', short)).not.toBe(commitment);
  });
});

describe('witness signatures (Ed25519)', () => {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const raw = (publicKey.export({ format: 'der', type: 'spki' }) as Buffer).subarray(12).toString('base64');
  const message = witnessMessage('att_1', 'aa', 'bb');

  it('verifies the signer\'s signature of the witness message only', () => {
    const signature = sign(null, Buffer.from(message), privateKey).toString('base64');
    expect(verifyWitnessSignature(raw, message, signature)).toBe(true);
    // Wrong message: another attestation.
    expect(verifyWitnessSignature(raw, witnessMessage('att_2', 'aa', 'bb'), signature)).toBe(false);
    // Wrong key.
    const other = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }) as Buffer;
    expect(verifyWitnessSignature(other.subarray(12).toString('base64'), message, signature)).toBe(false);
    // Garbage.
    expect(verifyWitnessSignature(raw, message, 'not a signature')).toBe(false);
    expect(verifyWitnessSignature('short', message, signature)).toBe(false);
  });
});

describe('lottery draw', () => {
  /** docs/api/vault.md: draw(i) = first 8 bytes of HMAC-SHA256(seed, "<id>:<i>") big-endian / 2^64; entry i wins when draw < odds. */
  const independentDraw = (seed: Buffer, id: string, i: number) => Number(createHmac('sha256', seed).update(`${id}:${i}`).digest().readBigUInt64BE(0)) / 2 ** 64;

  it('the revealed seed re-derives the commitment and the first winning entry', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.double({ min: 0.001, max: 1, noNaN: true }), (bytes, odds) => {
        const seed = Buffer.from(bytes);
        const winner = firstWinningEntry(seed, 'att_x', odds, 5_000);
        let expected: number | null = null;
        for (let i = 0; i < 5_000 && expected === null; i++) if (independentDraw(seed, 'att_x', i) < odds) expected = i;
        expect(winner).toBe(expected);
        expect(lotteryDraw(seed, 'att_x', 3)).toBe(independentDraw(seed, 'att_x', 3));
        expect(lotteryCommitment(seed)).toBe(createHash('sha256').update(Buffer.concat([Buffer.from('vault-lottery-seed/v1'), Buffer.from([0]), seed])).digest('hex'));
      }),
      { numRuns: 50 },
    );
  });

  it('the yielding scan finds the same entry as the plain one, across slices, and gives the event loop back between them', async () => {
    const seed = Buffer.alloc(32, 7);
    for (const odds of [0.5, 1e-4, 1e-300]) {
      expect(await firstWinningEntryYielding(seed, 'att_y', odds, 9_000)).toBe(firstWinningEntry(seed, 'att_y', odds, 9_000));
    }
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    await firstWinningEntryYielding(seed, 'att_y', 1e-300, 20_000);
    clearInterval(timer);
    expect(ticks).toBeGreaterThan(0);
  });

  it('the win probability grows with entries', () => {
    expect(winProbability(0.1, 0)).toBe(0);
    expect(winProbability(0.1, 1)).toBeCloseTo(0.1);
    expect(winProbability(0.1, 10)).toBeCloseTo(1 - 0.9 ** 10);
    expect(winProbability(1, 1)).toBe(1);
  });
});
