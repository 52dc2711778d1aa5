import { MessageBatcher } from './frame-batcher.js';
import type { ForwardReply, ForwardRequest } from './frames.js';
import { StringTableReader, StringTableWriter } from './string-table.js';

/**
 * Forward frames in the flat format: one array per frame, the tag first,
 * then each message's fields in a fixed order, instead of an object per
 * message (frames.ts, the first format):
 * - requests: [FLAT_TAG, id, kind, key, message, message_id | null, id, ...],
 *   kind and key written through the stream's string table (string-table.ts);
 * - replies: [FLAT_TAG, id, ok, value (ok) | WireError (not ok), id, ...].
 *
 * Why: in the cross-node streaming bench, writing and reading each message's
 * object (its keys, its key string) was the largest single cost at both ends
 * (msgpackr 16-19% of each node's time). A first-format frame is an array of
 * objects, so the first item tells the formats apart.
 *
 * Negotiated per stream, so that nodes of the previous version and this one
 * still talk: the client asks for the flat format in the Forward call's
 * metadata (FLAT_FORMAT_METADATA); a server that knows it says so in its
 * initial metadata and from then on replies flat; the client sends flat
 * frames once it has read that. Either end reads both formats.
 */
export const FLAT_TAG = 2;
export const FLAT_FORMAT_METADATA = 'x-forward-format';
export const FLAT_FORMAT_VALUE = 'flat';

const REQUEST_FIELDS = 5;
const REPLY_FIELDS = 3;

/** The client's requests on one stream; owns the stream's sending string table. */
export class FlatRequestBatcher extends MessageBatcher {
  private readonly strings = new StringTableWriter();

  constructor(write: (payload: Buffer) => void, maxMessages = 1024) {
    super(write, maxMessages, [FLAT_TAG]);
  }

  push(id: number, kind: string, key: string, message: unknown, messageId: string | undefined): void {
    this.values.push(id, this.strings.encode(kind), this.strings.encode(key), message, messageId ?? null);
    this.added();
  }
}

/** The server's replies on one stream. */
export class FlatReplyBatcher extends MessageBatcher {
  constructor(write: (payload: Buffer) => void, maxMessages = 1024) {
    super(write, maxMessages, [FLAT_TAG]);
  }

  /** `value`: the reply when ok, the WireError when not. */
  push(id: number, ok: boolean, value: unknown): void {
    this.values.push(id, ok, value);
    this.added();
  }
}

export type RequestVisitor = (id: number, kind: string, key: string, message: unknown, messageId: string | undefined) => void;

/**
 * Visits the requests of a decoded frame of either format, in order. A flat
 * frame is checked whole, and its strings read through `strings`, before
 * the first visit: one that does not parse throws with nothing run (the
 * caller ends the stream: its string table can no longer be trusted).
 */
export function visitRequests(items: unknown[], strings: StringTableReader, visit: RequestVisitor): void {
  if (items[0] !== FLAT_TAG) {
    for (const request of items as ForwardRequest[]) visit(request.id, request.kind, request.key, request.message, request.message_id);
    return;
  }
  if ((items.length - 1) % REQUEST_FIELDS !== 0) throw new Error('flat forward frame: incomplete message');
  for (let i = 1; i < items.length; i += REQUEST_FIELDS) {
    const messageId = items[i + 4];
    if (typeof items[i] !== 'number' || (messageId !== null && typeof messageId !== 'string')) throw new Error('flat forward frame: bad field');
    items[i + 1] = strings.decode(items[i + 1]);
    items[i + 2] = strings.decode(items[i + 2]);
  }
  for (let i = 1; i < items.length; i += REQUEST_FIELDS) {
    const messageId = items[i + 4];
    visit(items[i] as number, items[i + 1] as string, items[i + 2] as string, items[i + 3], messageId === null ? undefined : (messageId as string));
  }
}

export type ReplyVisitor = (id: number, ok: boolean, value: unknown) => void;

/** Visits the replies of a decoded frame of either format; `value` is the WireError of a failed one. */
export function visitReplies(items: unknown[], visit: ReplyVisitor): void {
  if (items[0] !== FLAT_TAG) {
    for (const reply of items as ForwardReply[]) visit(reply.id, reply.ok, reply.ok ? reply.value : reply.error);
    return;
  }
  if ((items.length - 1) % REPLY_FIELDS !== 0) throw new Error('flat reply frame: incomplete message');
  for (let i = 1; i < items.length; i += REPLY_FIELDS) {
    if (typeof items[i] !== 'number' || typeof items[i + 1] !== 'boolean') throw new Error('flat reply frame: bad field');
  }
  for (let i = 1; i < items.length; i += REPLY_FIELDS) visit(items[i] as number, items[i + 1] as boolean, items[i + 2]);
}
