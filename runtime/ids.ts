import { randomFillSync } from 'node:crypto';

/**
 * Opaque, URL-safe, unguessable ids (128 random bits). Random bytes are drawn
 * from a pool so that an id costs a slice, not a syscall.
 */
const POOL_BYTES = 4096;
const ID_BYTES = 16;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let offset = POOL_BYTES;

export function randomId(prefix = ''): string {
  if (offset + ID_BYTES > POOL_BYTES) {
    randomFillSync(pool);
    offset = 0;
  }
  const id = pool.toString('base64url', offset, offset + ID_BYTES);
  offset += ID_BYTES;
  return prefix + id;
}
