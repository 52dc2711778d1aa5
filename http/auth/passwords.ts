import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Password hashing with scrypt (a slow, memory-hard KDF from node:crypto).
 * node:crypto runs scrypt on the libuv thread pool, so hashing never blocks
 * the event loop. Stored as `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` so the
 * cost can be raised later without breaking old hashes.
 */
const KEY_BYTES = 32;
const SALT_BYTES = 16;
const BLOCK_SIZE = 8;
const PARALLELISM = 1;

function derive(password: string, salt: Buffer, costLog2: number, r: number, p: number): Promise<Buffer> {
  const N = 2 ** costLog2;
  const options: ScryptOptions = { N, r, p, maxmem: 256 * N * r + 1024 * 1024 };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFKC'), salt, KEY_BYTES, options, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

export async function hashPassword(password: string, costLog2: number): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, costLog2, BLOCK_SIZE, PARALLELISM);
  return ['scrypt', costLog2, BLOCK_SIZE, PARALLELISM, salt.toString('base64'), key.toString('base64')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [, costLog2, r, p, salt, expected] = parts;
  const expectedKey = Buffer.from(expected, 'base64');
  const key = await derive(password, Buffer.from(salt, 'base64'), Number(costLog2), Number(r), Number(p));
  return key.length === expectedKey.length && timingSafeEqual(key, expectedKey);
}
