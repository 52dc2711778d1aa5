import { describe, expect, it } from 'vitest';
import { decodeFrame, encodeFrame, type ForwardReply, type ForwardRequest } from '../../cluster/transport/frames.js';
import { FLAT_TAG, FlatReplyBatcher, FlatRequestBatcher, visitReplies, visitRequests } from '../../cluster/transport/forward-frames.js';
import { StringTableReader, StringTableWriter } from '../../cluster/transport/string-table.js';

/**
 * Forward frames in the flat format (cluster/transport/forward-frames.ts) and
 * the string table both ends of a stream keep (string-table.ts): what the
 * receiver reads is what the sender wrote, frame after frame, past the
 * table's capacity; the first format still reads; a frame that does not
 * parse runs nothing.
 */
function generator(seed: number) {
  let state = seed;
  return () => (state = (state * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
}

interface Sent {
  id: number;
  kind: string;
  key: string;
  message: unknown;
  messageId: string | undefined;
}

describe('string table', () => {
  it('gives the receiver every string the sender wrote, with keys repeated, new and evicted', () => {
    const random = generator(3);
    const writer = new StringTableWriter(64);
    const reader = new StringTableReader(64);
    let asSlots = 0;
    for (let i = 0; i < 20_000; i++) {
      // Half from a set that fits the table, half from one that does not: hits, misses and evictions.
      const value = random() < 0.5 ? `hot-${Math.floor(random() * 40)}` : `cold-${Math.floor(random() * 500)}`;
      const field = writer.encode(value);
      if (typeof field === 'number') asSlots++;
      expect(reader.decode(field)).toBe(value);
    }
    expect(asSlots).toBeGreaterThan(5_000);
  });

  it('refuses a slot it was never given', () => {
    const reader = new StringTableReader(8);
    expect(() => reader.decode(0)).toThrow(/no slot 0/);
    reader.decode('a');
    expect(reader.decode(0)).toBe('a');
    expect(() => reader.decode(1)).toThrow();
    expect(() => reader.decode(0.5)).toThrow();
    expect(() => reader.decode(null)).toThrow();
  });
});

describe('flat forward frames', () => {
  it('carry requests and replies in order across frames, as the sender pushed them', () => {
    const random = generator(11);
    const frames: Buffer[] = [];
    const requests = new FlatRequestBatcher((payload) => frames.push(payload), 50);
    const sent: Sent[] = [];
    for (let id = 0; id < 5_000; id++) {
      const request: Sent = {
        id,
        kind: random() < 0.9 ? 'lock' : 'user',
        key: `["t","ns","k${Math.floor(random() * 6_000)}"]`,
        message: random() < 0.5 ? { op: 'status' } : { op: 'acquire', owner_id: `o${id}`, ttl_seconds: 30 },
        messageId: random() < 0.2 ? `m-${id}` : undefined,
      };
      sent.push(request);
      requests.push(request.id, request.kind, request.key, request.message, request.messageId);
    }
    requests.flush();
    expect(frames.length).toBe(100);

    const strings = new StringTableReader();
    const seen: Sent[] = [];
    for (const payload of frames) {
      const items = decodeFrame(payload);
      expect(items[0]).toBe(FLAT_TAG);
      visitRequests(items, strings, (id, kind, key, message, messageId) => seen.push({ id, kind, key, message, messageId }));
    }
    expect(seen).toEqual(sent);

    const replyFrames: Buffer[] = [];
    const replies = new FlatReplyBatcher((payload) => replyFrames.push(payload), 1024);
    for (const request of sent) replies.push(request.id, request.id % 7 !== 0, request.id % 7 !== 0 ? { holder: null, n: request.id } : { code: 'not_leader', message: 'no' });
    replies.flush();
    const settled: [number, boolean, unknown][] = [];
    for (const payload of replyFrames) visitReplies(decodeFrame(payload), (id, ok, value) => settled.push([id, ok, value]));
    expect(settled.length).toBe(sent.length);
    expect(settled[7]).toEqual([7, false, { code: 'not_leader', message: 'no' }]);
    expect(settled[8]).toEqual([8, true, { holder: null, n: 8 }]);
  });

  it('reads frames of the first format (an object per message)', () => {
    const requests: ForwardRequest[] = [
      { id: 1, kind: 'lock', key: 'a', message: { op: 'status' } },
      { id: 2, kind: 'lock', key: 'b', message: null, message_id: 'm-2' },
    ];
    const seen: unknown[] = [];
    visitRequests(decodeFrame(encodeFrame(requests)), new StringTableReader(), (id, kind, key, message, messageId) => seen.push([id, kind, key, message, messageId]));
    expect(seen).toEqual([
      [1, 'lock', 'a', { op: 'status' }, undefined],
      [2, 'lock', 'b', null, 'm-2'],
    ]);
    const replies: ForwardReply[] = [
      { id: 1, ok: true, value: 5 },
      { id: 2, ok: false, error: { code: 'not_leader', message: 'no' } },
    ];
    const settled: unknown[] = [];
    visitReplies(decodeFrame(encodeFrame(replies)), (id, ok, value) => settled.push([id, ok, value]));
    expect(settled).toEqual([
      [1, true, 5],
      [2, false, { code: 'not_leader', message: 'no' }],
    ]);
  });

  it('runs nothing of a flat frame that does not parse', () => {
    const visit = () => {
      throw new Error('visited');
    };
    const strings = new StringTableReader();
    // A message cut short, a bad id, a bad message id, a slot never defined (the last after a good message).
    expect(() => visitRequests([FLAT_TAG, 1, 'lock', 'a', null], strings, visit)).toThrow(/incomplete/);
    expect(() => visitRequests([FLAT_TAG, 'x', 'lock', 'a', null, null], strings, visit)).toThrow(/bad field/);
    expect(() => visitRequests([FLAT_TAG, 1, 'lock', 'a', null, 5], strings, visit)).toThrow(/bad field/);
    expect(() => visitRequests([FLAT_TAG, 1, 'lock', 'a', null, null, 2, 'lock', 99, null, null], new StringTableReader(), visit)).toThrow(/no slot 99/);
    expect(() => visitReplies([FLAT_TAG, 1, true], visit)).toThrow(/incomplete/);
    expect(() => visitReplies([FLAT_TAG, 1, 'yes', 5], visit)).toThrow(/bad field/);
  });
});
