import { createHash } from 'node:crypto';
import type { LockProof, ProofLeaf } from './messages.js';

/**
 * The lock proof: a Merkle tree over labelled leaves, so that anyone holding
 * the leaves can recompute the root, and anyone holding the root can check a
 * leaf (docs/api/vault.md, "Verifying a lock proof", gives the same recipe):
 *
 * - leaf hash = SHA-256(0x00 | UTF-8(label) | 0x00 | UTF-8(value)), hex;
 * - inner node = SHA-256(0x01 | left | right) over the 32 raw bytes of each child;
 * - a level with an odd count carries its last node up unchanged;
 * - the root of one leaf is that leaf's hash.
 *
 * The 0x00/0x01 prefixes keep a leaf from being passed off as an inner node
 * (the second-preimage attack on plain Merkle trees, RFC 6962 §2.1).
 */
export function leafHash(label: string, value: string): string {
  return createHash('sha256').update(Buffer.from([0])).update(label, 'utf8').update(Buffer.from([0])).update(value, 'utf8').digest('hex');
}

function innerHash(left: string, right: string): string {
  return createHash('sha256').update(Buffer.from([1])).update(Buffer.from(left, 'hex')).update(Buffer.from(right, 'hex')).digest('hex');
}

export function merkleRoot(hashes: readonly string[]): string {
  if (hashes.length === 0) throw new Error('a Merkle tree needs at least one leaf');
  let level = [...hashes];
  while (level.length > 1) {
    const next: string[] = [];
    for (let i = 0; i + 1 < level.length; i += 2) next.push(innerHash(level[i], level[i + 1]));
    if (level.length % 2 === 1) next.push(level[level.length - 1]);
    level = next;
  }
  return level[0];
}

export function buildLockProof(leaves: readonly { label: string; value: string }[]): LockProof {
  const hashed: ProofLeaf[] = leaves.map(({ label, value }) => ({ label, value, hash: leafHash(label, value) }));
  return { leaves: hashed, merkle_root: merkleRoot(hashed.map((leaf) => leaf.hash)) };
}

/** JSON with object keys sorted at every level: one text per value, so its hash is reproducible. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
