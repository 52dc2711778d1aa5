import { createCipheriv, createDecipheriv, createHash } from 'node:crypto';

/**
 * Fields marked `encrypted` are stored under AES-256-GCM (docs/api/forms.md,
 * "Encrypted fields"): the value's JSON, sealed as `enc:v1:<base64 of nonce |
 * ciphertext | tag>` with `<form_id>/<submission_id>/<field>` as additional
 * authenticated data, so a sealed value cannot be moved to another
 * submission or field. The same layout as http/vault-crypto.ts seals the
 * vault's keys with; actors/ cannot import http/, so the few lines are here.
 *
 * The key is the node's (DATA_DIR/forms-field.key), set once by the forms
 * routes at start (setFieldKey) and read by the form actor's turns; the
 * nonce is derived from a fresh id of the turn (TurnContext.newId), unique
 * per value, since actors draw no randomness of their own.
 */
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const PREFIX = 'enc:v1:';
let fieldKey: Buffer | null = null;

export function setFieldKey(key: Buffer | null): void {
  if (key && key.length !== 32) throw new Error('the forms field key must be 32 bytes');
  fieldKey = key;
}

export function hasFieldKey(): boolean {
  return fieldKey !== null;
}

export function isSealed(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(PREFIX);
}

export function sealField(value: unknown, aad: string, unique: string): string {
  if (!fieldKey) throw new Error('no forms field key on this node');
  const nonce = createHash('sha256').update(unique).digest().subarray(0, NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', fieldKey, nonce);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const body = Buffer.concat([cipher.update(Buffer.from(JSON.stringify(value), 'utf8')), cipher.final()]);
  return PREFIX + Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64');
}

/** The value sealed by sealField; throws when the key, the aad or the bytes differ. */
export function openField(sealed: string, aad: string): unknown {
  if (!fieldKey) throw new Error('no forms field key on this node');
  const raw = Buffer.from(sealed.slice(PREFIX.length), 'base64');
  const decipher = createDecipheriv('aes-256-gcm', fieldKey, raw.subarray(0, NONCE_BYTES));
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
  return JSON.parse(Buffer.concat([decipher.update(raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString('utf8'));
}
