import { encodeFrame } from './frames.js';

/**
 * Collects the messages written to one stream during a tick of the event
 * loop and sends them as one frame: under load, hundreds of actor messages
 * share a frame; at rest a lone message leaves on the next tick. A frame is
 * `head` followed by what the messages pushed: one item each (FrameBatcher),
 * or each its fields in a fixed order (the flat forward frames,
 * forward-frames.ts).
 */
export abstract class MessageBatcher {
  /** The frame being filled; a subclass pushes a message onto it, then calls added(). */
  protected values: unknown[];
  private messages = 0;
  private scheduled = false;

  constructor(
    private readonly write: (payload: Buffer) => void,
    private readonly maxMessages: number,
    private readonly head: readonly unknown[],
  ) {
    this.values = [...head];
  }

  /** A message was pushed onto `values`. */
  protected added(): void {
    this.messages++;
    if (this.messages >= this.maxMessages) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  flush(): void {
    this.scheduled = false;
    if (this.messages === 0) return;
    const values = this.values;
    const messages = this.messages;
    this.values = [...this.head];
    this.messages = 0;
    this.write(encodeFrame(values, messages));
  }
}

/** A frame of one item per message (frames.ts). */
export class FrameBatcher<T> extends MessageBatcher {
  constructor(write: (payload: Buffer) => void, maxItems = 1024) {
    super(write, maxItems, []);
  }

  push(item: T): void {
    this.values.push(item);
    this.added();
  }
}
