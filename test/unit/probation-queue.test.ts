import { describe, expect, it } from 'vitest';
import { ProbationQueue } from '../../runtime/probation.js';

const entry = (name: string) => ({ name, probation: false });

describe('ProbationQueue', () => {
  it('gives the oldest still on probation, skipping those promoted or dropped', () => {
    const queue = new ProbationQueue<ReturnType<typeof entry>>();
    const [a, b, c] = [entry('a'), entry('b'), entry('c')];
    for (const x of [a, b, c]) queue.add(x);
    expect(queue.size).toBe(3);
    expect(a.probation).toBe(true);
    queue.release(a);
    queue.release(a); // twice: counted once
    expect(queue.size).toBe(2);
    expect(queue.oldest()).toBe(b);
    queue.requeueOldest();
    expect(queue.oldest()).toBe(c);
    queue.release(c);
    expect(queue.oldest()).toBe(b);
    queue.release(b);
    expect(queue.oldest()).toBeUndefined();
    expect(queue.size).toBe(0);
  });

  it('does not hold on to entries that left probation (the queue is compacted)', () => {
    const queue = new ProbationQueue<ReturnType<typeof entry>>();
    const kept = entry('kept');
    queue.add(kept);
    for (let i = 0; i < 100_000; i++) {
      const x = entry(`x${i}`);
      queue.add(x);
      queue.release(x);
    }
    expect(queue.size).toBe(1);
    expect((queue as unknown as { entries: unknown[]; head: number }).entries.length).toBeLessThan(2_100);
    expect(queue.oldest()).toBe(kept);
  });
});
