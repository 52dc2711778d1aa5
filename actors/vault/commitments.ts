import { createHash } from 'node:crypto';

/**
 * The hashes an attestation publishes at creation (docs/api/vault.md,
 * "Verifying"): what was locked, which key locks it, which seed draws the
 * lottery. Each is SHA-256, hex; the key commitment and the seed commitment
 * are domain-separated so neither can be confused with a content hash.
 */
export function contentHash(data: string): string {
  return createHash('sha256').update(data, 'utf8').digest('hex');
}

/** SHA-256("vault-key-commitment/v1" | 0x00 | attestation_id | 0x00 | key), over the 32 raw key bytes. */
export function keyCommitment(attestation_id: string, key: Buffer): string {
  return createHash('sha256').update('vault-key-commitment/v1').update(Buffer.from([0])).update(attestation_id, 'utf8').update(Buffer.from([0])).update(key).digest('hex');
}

/** SHA-256("vault-lottery-seed/v1" | 0x00 | seed), over the 32 raw seed bytes. */
export function lotteryCommitment(seed: Buffer): string {
  return createHash('sha256').update('vault-lottery-seed/v1').update(Buffer.from([0])).update(seed).digest('hex');
}
