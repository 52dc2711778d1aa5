import { describe, expect, it } from 'vitest';
import { Semaphore } from '../../http/auth/semaphore.js';

/** The bounded semaphore that caps concurrent password KDF runs (http/auth/semaphore.ts). */
class Refused extends Error {}

/** A task that runs until its release() is called. */
function gate() {
  let release!: () => void;
  let fail!: (error: Error) => void;
  const done = new Promise<void>((resolve, reject) => {
    release = resolve;
    fail = reject;
  });
  return { task: () => done, release, fail };
}

/** Lets every settled promise's continuations run. */
const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('Semaphore', () => {
  it('runs at most running_max tasks at once and starts the waiters in arrival order', async () => {
    const semaphore = new Semaphore(2, 10, () => new Refused());
    const gates = Array.from({ length: 5 }, gate);
    const started: number[] = [];
    const runs = gates.map((g, i) =>
      semaphore.run(() => {
        started.push(i);
        return g.task();
      }),
    );
    await flush();
    expect(started).toEqual([0, 1]);
    expect([semaphore.running_count, semaphore.waiting_count]).toEqual([2, 3]);
    gates[1].release();
    await flush();
    expect(started).toEqual([0, 1, 2]);
    gates[0].release();
    await flush();
    expect(started).toEqual([0, 1, 2, 3]);
    expect([semaphore.running_count, semaphore.waiting_count]).toEqual([2, 1]);
    for (const g of gates) g.release();
    await Promise.all(runs);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect([semaphore.running_count, semaphore.waiting_count]).toEqual([0, 0]);
  });

  it('refuses at once, without starting the task, when every slot and waiting place is taken', async () => {
    const semaphore = new Semaphore(1, 2, () => new Refused('busy'));
    const gates = Array.from({ length: 3 }, gate);
    const runs = gates.map((g) => semaphore.run(g.task));
    let ran = false;
    await expect(
      semaphore.run(async () => {
        ran = true;
      }),
    ).rejects.toBeInstanceOf(Refused);
    expect(ran).toBe(false);
    expect([semaphore.running_count, semaphore.waiting_count]).toEqual([1, 2]);
    // A place frees up as the first task ends.
    gates[0].release();
    await flush();
    const fourth = semaphore.run(async () => 'ran');
    for (const g of gates) g.release();
    await expect(fourth).resolves.toBe('ran');
    await Promise.all(runs);
  });

  it('with no waiting places, refuses everything past running_max', async () => {
    const semaphore = new Semaphore(2, 0, () => new Refused());
    const gates = [gate(), gate()];
    const runs = gates.map((g) => semaphore.run(g.task));
    await expect(semaphore.run(async () => 1)).rejects.toBeInstanceOf(Refused);
    for (const g of gates) g.release();
    await Promise.all(runs);
    await expect(semaphore.run(async () => 1)).resolves.toBe(1);
  });

  it('frees the slot when a task fails, and passes the failure on', async () => {
    const semaphore = new Semaphore(1, 1, () => new Refused());
    const failing = gate();
    const first = semaphore.run(failing.task);
    const second = semaphore.run(async () => 'next');
    failing.fail(new Error('kdf failed'));
    await expect(first).rejects.toThrow('kdf failed');
    await expect(second).resolves.toBe('next');
    expect([semaphore.running_count, semaphore.waiting_count]).toEqual([0, 0]);
  });

  it('rejects nonsensical bounds', () => {
    expect(() => new Semaphore(0, 1, () => new Refused())).toThrow(RangeError);
    expect(() => new Semaphore(1, -1, () => new Refused())).toThrow(RangeError);
  });
});
