import { createPublicKey, verify } from 'node:crypto';

/**
 * Witness signatures: each signer named at creation signs, with Ed25519
 * (RFC 8032), the canonical message below, and submits the signature (base64
 * of its 64 bytes). The message names the attestation, what was locked and
 * the proof's root, so a signature cannot be replayed on another attestation.
 */
export function witnessMessage(attestation_id: string, content_hash: string, merkle_root: string): string {
  return `vault-witness/v1\n${attestation_id}\n${content_hash}\n${merkle_root}\n`;
}

/** DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410): the raw 32-byte key follows. */
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** The public key as base64 of its 32 raw bytes; null when it is not one. */
export function parsePublicKey(base64: string) {
  if (!/^[A-Za-z0-9+/]{43}=$/.test(base64)) return null;
  const raw = Buffer.from(base64, 'base64');
  try {
    return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
  } catch {
    return null;
  }
}

export function verifyWitnessSignature(public_key: string, message: string, signature: string): boolean {
  const key = parsePublicKey(public_key);
  const sig = Buffer.from(signature, 'base64');
  if (!key || sig.length !== 64) return false;
  try {
    return verify(null, Buffer.from(message, 'utf8'), key, sig);
  } catch {
    return false;
  }
}
