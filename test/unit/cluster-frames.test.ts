import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { decodeFrame, encodeFrame, RECORDS_FROM_ITEMS } from '../../cluster/transport/frames.js';

/**
 * Frames carry msgpackr records (cluster/transport/frames.ts): each frame must
 * decode on its own, whatever frames came before it, from this node or
 * another, and a decoder of the previous version (records off) must read it.
 */
function generator(seed: number) {
  let state = seed;
  const random = () => ((state = (state * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  // 300 shapes: more than msgpackr's 64 inline record ids, so ids are reused within and across frames.
  const shapes = Array.from({ length: 300 }, (_, s) => Array.from({ length: 1 + (s % 9) }, (_, k) => `f${s}_${k}`));
  const object = (depth: number): Record<string, unknown> => {
    const shape = shapes[Math.floor(random() * shapes.length)];
    const result: Record<string, unknown> = {};
    for (const key of shape) {
      const pick = random();
      result[key] = pick < 0.2 && depth < 3 ? object(depth + 1) : pick < 0.5 ? Math.floor(random() * 1e6) : pick < 0.6 ? null : pick < 0.7 ? [1, 'a', { x: 1 }] : `s${Math.floor(random() * 100)}`;
    }
    return result;
  };
  return { random, object };
}

describe('cluster frames', () => {
  it('decode on their own and in any order, whatever frames were encoded before them', () => {
    const { random, object } = generator(7);
    const frames: { items: unknown[]; payload: Buffer }[] = [];
    for (let f = 0; f < 2_000; f++) {
      const items = Array.from({ length: 1 + Math.floor(random() * 40) }, () => object(0));
      frames.push({ items, payload: encodeFrame(items) });
    }
    // Decoded in another order than encoded (as frames from several peers interleave at one decoder).
    for (let i = frames.length - 1; i >= 0; i -= 1) expect(decodeFrame(frames[i].payload)).toEqual(frames[i].items);
    // And by a decoder that never saw another frame (small frames are maps: read as objects, as decodeFrame does).
    for (const frame of frames.slice(0, 50)) expect(new Packr({ useRecords: true, mapsAsObjects: true }).unpack(frame.payload)).toEqual(frame.items);
  });

  it('are read by a decoder with records off (a node of the previous version), and its frames by this one', () => {
    const replies = Array.from({ length: 10 }, (_, i) => ({ id: i, ok: true, value: { key: `k${i}`, is_locked: i % 2 === 0, lock_id: null, fence_token: i } }));
    const previous = new Packr({ useRecords: false });
    expect(previous.unpack(encodeFrame(replies))).toEqual(replies);
    expect(decodeFrame(previous.pack(replies))).toEqual(replies);
  });

  it('of fewer than RECORDS_FROM_ITEMS items are plain maps, byte for byte what the previous version wrote', () => {
    const replies = (n: number) => Array.from({ length: n }, (_, i) => ({ id: i, ok: true, value: { key: `k${i}`, is_locked: false, lock_id: null, fence_token: i } }));
    const previous = new Packr({ useRecords: false });
    for (const n of [1, 3, RECORDS_FROM_ITEMS - 1]) {
      expect(encodeFrame(replies(n)).equals(previous.pack(replies(n)))).toBe(true);
      expect(decodeFrame(encodeFrame(replies(n)))).toEqual(replies(n));
    }
    expect(encodeFrame(replies(RECORDS_FROM_ITEMS)).equals(previous.pack(replies(RECORDS_FROM_ITEMS)))).toBe(false);
  });

  it('are smaller than maps when a shape repeats', () => {
    const requests = Array.from({ length: 100 }, (_, i) => ({ id: i, kind: 'lock', key: `t1/jobs/k${i}`, message: { op: 'status' } }));
    expect(encodeFrame(requests).length).toBeLessThan(new Packr({ useRecords: false }).pack(requests).length * 0.7);
  });
});
