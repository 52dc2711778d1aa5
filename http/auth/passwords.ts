import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { ServiceError } from '../../runtime/index.js';
import { Semaphore } from './semaphore.js';

/**
 * Password hashing with scrypt (a slow, memory-hard KDF from node:crypto).
 * node:crypto runs scrypt on the libuv thread pool, so hashing never blocks
 * the event loop. Stored as `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` so the
 * cost can be raised later without breaking old hashes.
 *
 * The thread pool (4 threads unless UV_THREADPOOL_SIZE says otherwise) also
 * runs LMDB's writes, so at most KDF_RUNNING_MAX derivations run at once in
 * this process and at most KDF_WAITING_MAX wait; past that the request is
 * refused with 503 `server_busy` and Retry-After instead of queueing.
 */
const KEY_BYTES = 32;
const SALT_BYTES = 16;
const BLOCK_SIZE = 8;
const PARALLELISM = 1;
export const KDF_RUNNING_MAX = 2;
export const KDF_WAITING_MAX = 64;
const KDF_BUSY_RETRY_AFTER_SECONDS = 1;

/**
 * Stored instead of a hash for an account that has no password (SCIM
 * provisioning): no password matches it, and checking one costs the same KDF
 * work as a real hash, like a login that matches no user.
 */
export const UNUSABLE_PASSWORD_HASH = '!unusable';
/** The salt of the stand-in derivation for a hash that cannot match (its result is thrown away). */
const STAND_IN_SALT = Buffer.alloc(SALT_BYTES);

const kdfSlots = new Semaphore(
  KDF_RUNNING_MAX,
  KDF_WAITING_MAX,
  () => new ServiceError('server_busy', 'Too many password checks in progress; try again shortly.', { retryAfterSeconds: KDF_BUSY_RETRY_AFTER_SECONDS }),
);

function derive(password: string, salt: Buffer, costLog2: number, r: number, p: number): Promise<Buffer> {
  const N = 2 ** costLog2;
  const options: ScryptOptions = { N, r, p, maxmem: 256 * N * r + 1024 * 1024 };
  return kdfSlots.run(
    () =>
      new Promise<Buffer>((resolve, reject) => {
        scrypt(password.normalize('NFKC'), salt, KEY_BYTES, options, (error, key) => (error ? reject(error) : resolve(key)));
      }),
  );
}

export async function hashPassword(password: string, costLog2: number): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, costLog2, BLOCK_SIZE, PARALLELISM);
  return ['scrypt', costLog2, BLOCK_SIZE, PARALLELISM, salt.toString('base64'), key.toString('base64')].join('$');
}

/**
 * Whether `password` matches `stored`. A stored value that is no scrypt hash
 * (UNUSABLE_PASSWORD_HASH, or the stand-in for a login that matches no user)
 * matches nothing, after one derivation at `costLog2`, so the answer takes as
 * long as for a real account hashed at the node's cost.
 */
export async function verifyPassword(password: string, stored: string, costLog2: number): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') {
    await derive(password, STAND_IN_SALT, costLog2, BLOCK_SIZE, PARALLELISM);
    return false;
  }
  const [, storedCostLog2, r, p, salt, expected] = parts;
  const expectedKey = Buffer.from(expected, 'base64');
  const key = await derive(password, Buffer.from(salt, 'base64'), Number(storedCostLog2), Number(r), Number(p));
  return key.length === expectedKey.length && timingSafeEqual(key, expectedKey);
}
