import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { randomBytes } from 'node:crypto';

/**
 * A node's own 32-byte key kept in a file under DATA_DIR (the vault's seal key, the forms'
 * field key on an embedded node): base64, created at first use with mode 0600; a start that
 * loses the creation race reads the winner's.
 */
export function readOrCreateKeyFile(path: string): Buffer {
  mkdirSync(dirname(path), { recursive: true });
  try {
    writeFileSync(path, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const key = Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
  if (key.length !== 32) throw new Error(`${path} does not hold base64 of 32 bytes`);
  return key;
}

/** A key given in the environment: base64 of 32 bytes (44 characters), or '' when unset. */
export function base64KeyFrom(name: string, raw: string | undefined): string {
  if (!raw) return '';
  if (!/^[A-Za-z0-9+/]{43}=$/.test(raw.trim())) throw new Error(`${name} must be base64 of 32 random bytes (44 characters, e.g. from \`openssl rand -base64 32\`)`);
  return raw.trim();
}
