import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { NodeConfig } from './config.js';
import { readOrCreateKeyFile } from './node-key-file.js';

/**
 * The vault's cryptography at the edge (docs/api/vault.md, "Who holds what"):
 * AES-256-GCM for the content (under a fresh key per attestation) and for
 * sealing that key under the node's vault seal key. Sealed values are base64
 * of nonce (12 bytes) | ciphertext | tag (16 bytes), with the attestation id
 * as additional authenticated data, so a sealed value cannot be moved to
 * another attestation.
 */
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

export function aesGcmSeal(key: Buffer, plaintext: Buffer, aad: string): string {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64');
}

/** Throws when the value was not sealed under `key` for `aad` (or was altered). */
export function aesGcmOpen(key: Buffer, sealed: string, aad: string): Buffer {
  const raw = Buffer.from(sealed, 'base64');
  if (raw.length < NONCE_BYTES + TAG_BYTES) throw new Error('sealed value too short');
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, NONCE_BYTES));
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
  return Buffer.concat([decipher.update(raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES)), decipher.final()]);
}

/** The node's vault seal key: seals each attestation's content key and lottery seed at rest. */
export class VaultSeal {
  constructor(private readonly key: Buffer) {}

  seal(secret: Buffer, attestation_id: string): string {
    return aesGcmSeal(this.key, secret, attestation_id);
  }

  unseal(sealed: string, attestation_id: string): Buffer {
    return aesGcmOpen(this.key, sealed, attestation_id);
  }
}

const SEAL_FILE = 'vault-seal.key';
const seals = new Map<string, VaultSeal>();

/**
 * VAULT_SEAL_KEY when set. Otherwise an embedded node keeps its own in
 * DATA_DIR/vault-seal.key (created at first use, mode 0600), and a cluster
 * node has none: its nodes must share one key, so it must be configured.
 */
export function vaultSealFor(config: NodeConfig): VaultSeal | null {
  if (config.vaultSealKey) return new VaultSeal(Buffer.from(config.vaultSealKey, 'base64'));
  if (config.cluster) return null;
  const path = join(config.dataDir, SEAL_FILE);
  const cached = seals.get(path);
  if (cached) return cached;
  const seal = new VaultSeal(readOrCreateKeyFile(path));
  seals.set(path, seal);
  return seal;
}
