import { encodeFrame } from './frames.js';

/**
 * Collects the messages written to one stream during a tick of the event
 * loop and sends them as one frame: under load, hundreds of actor messages
 * share a frame; at rest a lone message leaves on the next tick.
 */
export class FrameBatcher<T> {
  private items: T[] = [];
  private scheduled = false;

  constructor(
    private readonly write: (payload: Buffer) => void,
    private readonly maxItems = 1024,
  ) {}

  push(item: T): void {
    this.items.push(item);
    if (this.items.length >= this.maxItems) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  flush(): void {
    this.scheduled = false;
    if (this.items.length === 0) return;
    const items = this.items;
    this.items = [];
    this.write(encodeFrame(items));
  }
}
