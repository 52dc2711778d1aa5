import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../runtime/index.js';
import { hashPassword, KDF_RUNNING_MAX, KDF_WAITING_MAX, UNUSABLE_PASSWORD_HASH, verifyPassword } from '../../http/auth/passwords.js';

/** Password hashing: the unusable marker, and the cap on concurrent KDF runs (http/auth/passwords.ts). */
const median = (samples: number[]) => [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)];

async function elapsedMs(run: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await run();
  return performance.now() - start;
}

describe('passwords', () => {
  it('verifies the password a hash was made from, and no other', async () => {
    const stored = await hashPassword('correct horse battery', 10);
    expect(stored).toMatch(/^scrypt\$10\$8\$1\$/);
    expect(await verifyPassword('correct horse battery', stored, 10)).toBe(true);
    expect(await verifyPassword('correct horse batterz', stored, 10)).toBe(false);
  });

  it('the unusable marker matches no password, after as much KDF work as a real hash', async () => {
    for (const attempt of ['', 'correct horse battery', UNUSABLE_PASSWORD_HASH, 'not-a-real-password']) {
      expect(await verifyPassword(attempt, UNUSABLE_PASSWORD_HASH, 10)).toBe(false);
    }
    // At cost 14 one derivation takes tens of milliseconds; a check that skipped it would take microseconds.
    const cost = 14;
    const real = await hashPassword('correct horse battery', cost);
    // Interleaved, so load on the machine hits both alike; the bound leaves room for that noise only.
    const realMs: number[] = [];
    const unusableMs: number[] = [];
    for (let i = 0; i < 5; i++) {
      realMs.push(await elapsedMs(() => verifyPassword('wrong guess', real, cost)));
      unusableMs.push(await elapsedMs(() => verifyPassword('wrong guess', UNUSABLE_PASSWORD_HASH, cost)));
    }
    expect(median(unusableMs)).toBeGreaterThan(median(realMs) * 0.25);
  });

  it(`runs at most ${KDF_RUNNING_MAX} derivations with ${KDF_WAITING_MAX} waiting; past that 503 server_busy with Retry-After`, async () => {
    const total = KDF_RUNNING_MAX + KDF_WAITING_MAX + 14;
    const results = await Promise.allSettled(Array.from({ length: total }, (_, i) => hashPassword(`password ${i}`, 10)));
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(KDF_RUNNING_MAX + KDF_WAITING_MAX);
    expect(refused).toHaveLength(14);
    for (const error of refused) {
      expect(error).toBeInstanceOf(ServiceError);
      expect(error).toMatchObject({ code: 'server_busy', statusCode: 503, retryAfterSeconds: 1 });
    }
    // Once the queue drained, hashing works again.
    await expect(hashPassword('after the burst', 10)).resolves.toMatch(/^scrypt\$/);
  });
});
