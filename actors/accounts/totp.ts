import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * TOTP (RFC 6238) over HOTP (RFC 4226): pure functions of a secret and a
 * time, so they are tested against the RFC's own vectors. Secrets are
 * exchanged in base32 (RFC 4648), as authenticator apps expect.
 */
export type TotpAlgorithm = 'sha1' | 'sha256' | 'sha512';

export interface TotpOptions {
  algorithm?: TotpAlgorithm;
  digits?: number;
  period_seconds?: number;
}

const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

export function base32Encode(bytes: Uint8Array): string {
  let bits = 0;
  let value = 0;
  let output = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      output += BASE32_ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) output += BASE32_ALPHABET[(value << (5 - bits)) & 31];
  return output;
}

/** Decodes base32, ignoring case, spaces and padding; null if not base32. */
export function base32Decode(text: string): Buffer | null {
  const clean = text.replace(/[\s=]/g, '').toUpperCase();
  let bits = 0;
  let value = 0;
  const bytes: number[] = [];
  for (const char of clean) {
    const index = BASE32_ALPHABET.indexOf(char);
    if (index < 0) return null;
    value = (value << 5) | index;
    bits += 5;
    if (bits >= 8) {
      bytes.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  return Buffer.from(bytes);
}

/** HOTP value for a counter (RFC 4226 §5.3, dynamic truncation). */
export function hotp(secret: Uint8Array, counter: number, options: TotpOptions = {}): string {
  const digits = options.digits ?? 6;
  const message = Buffer.alloc(8);
  message.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac(options.algorithm ?? 'sha1', secret).update(message).digest();
  const offset = mac[mac.length - 1] & 0x0f;
  const binary = ((mac[offset] & 0x7f) << 24) | (mac[offset + 1] << 16) | (mac[offset + 2] << 8) | mac[offset + 3];
  return String(binary % 10 ** digits).padStart(digits, '0');
}

/** The time step (counter) for a time in epoch-ms. */
export function totpStep(now_ms: number, period_seconds = 30): number {
  return Math.floor(now_ms / 1000 / period_seconds);
}

export function totp(secret: Uint8Array, now_ms: number, options: TotpOptions = {}): string {
  return hotp(secret, totpStep(now_ms, options.period_seconds), options);
}

/**
 * The step a code matches within ±window steps of now (clock skew), or null.
 * The caller refuses a step at or below the last one accepted, so a code is
 * never accepted twice.
 */
export function matchTotp(secret: Uint8Array, code: string, now_ms: number, window = 1, options: TotpOptions = {}): number | null {
  const digits = options.digits ?? 6;
  if (!new RegExp(`^\\d{${digits}}$`).test(code)) return null;
  const current = totpStep(now_ms, options.period_seconds);
  const presented = Buffer.from(code);
  let matched: number | null = null;
  // Check every candidate step, so the time taken does not depend on which matched.
  for (let step = current - window; step <= current + window; step++) {
    const expected = Buffer.from(hotp(secret, step, options));
    if (timingSafeEqual(expected, presented) && matched === null) matched = step;
  }
  return matched;
}

/** The otpauth:// URI authenticator apps read from a QR code (Key Uri Format). */
export function otpauthUri(secretBase32: string, account: string, issuer: string, options: TotpOptions = {}): string {
  const label = encodeURIComponent(`${issuer}:${account}`);
  const params = new URLSearchParams({
    secret: secretBase32,
    issuer,
    algorithm: (options.algorithm ?? 'sha1').toUpperCase(),
    digits: String(options.digits ?? 6),
    period: String(options.period_seconds ?? 30),
  });
  return `otpauth://totp/${label}?${params.toString()}`;
}
