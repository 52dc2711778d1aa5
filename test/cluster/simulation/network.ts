import type { Rng } from './prng.js';
import type { Scheduler } from './scheduler.js';

/**
 * Links between nodes: each direction delivers in order after a random small
 * delay; a cut drops everything in flight (both directions) and everything
 * sent until it heals. Endpoints learn of a cut only when it heals (the
 * broken stream is then reported closed), as with a silent network partition.
 * A stall delays everything on the link (in flight or sent meanwhile) until
 * it ends, in order, as TCP does across a short outage: messages arrive late.
 */
interface Link {
  up: boolean;
  generation: number;
  stalledUntil: number;
  lastAt: Map<string, number>;
}

export class Network {
  private readonly links = new Map<string, Link>();
  /** Called on heal for each endpoint: (node, peer) its stream to peer was broken. */
  onStreamBroken: (node: string, peer: string) => void = () => undefined;

  constructor(
    private readonly sched: Scheduler,
    private readonly rng: Rng,
    private readonly minDelayMs: number,
    private readonly maxDelayMs: number,
  ) {}

  private link(a: string, b: string): Link {
    const id = a < b ? `${a}|${b}` : `${b}|${a}`;
    let link = this.links.get(id);
    if (!link) this.links.set(id, (link = { up: true, generation: 0, stalledUntil: 0, lastAt: new Map() }));
    return link;
  }

  isUp(a: string, b: string): boolean {
    return this.link(a, b).up;
  }

  /** Sends from a to b; `deliver` runs at b's end unless the link is cut meanwhile. */
  send(from: string, to: string, deliver: () => void): void {
    const link = this.link(from, to);
    if (!link.up) return;
    const generation = link.generation;
    const at = Math.max(link.lastAt.get(to) ?? 0, this.sched.now + this.rng.int(this.minDelayMs, this.maxDelayMs), link.stalledUntil + 1);
    link.lastAt.set(to, at);
    const arrive = () => {
      if (link.generation !== generation) return;
      // Stalled meanwhile: held back to the end of the stall (still ahead of what is sent later).
      if (this.sched.now < link.stalledUntil) this.sched.at(link.stalledUntil, arrive);
      else deliver();
    };
    this.sched.at(at, arrive);
  }

  stall(a: string, b: string, ms: number): void {
    const link = this.link(a, b);
    link.stalledUntil = Math.max(link.stalledUntil, this.sched.now + ms);
    this.sched.trace(`net: stall ${a}-${b} for ${ms}ms`);
  }

  unstallAll(): void {
    for (const link of this.links.values()) link.stalledUntil = Math.min(link.stalledUntil, this.sched.now);
  }

  cut(a: string, b: string): void {
    const link = this.link(a, b);
    if (!link.up) return;
    link.up = false;
    link.generation++;
    this.sched.trace(`net: cut ${a}-${b}`);
  }

  heal(a: string, b: string): void {
    const link = this.link(a, b);
    if (link.up) return;
    link.up = true;
    this.sched.trace(`net: heal ${a}-${b}`);
    this.onStreamBroken(a, b);
    this.onStreamBroken(b, a);
  }

  cutLinks(): [string, string][] {
    const out: [string, string][] = [];
    for (const [id, link] of this.links) if (!link.up) out.push(id.split('|') as [string, string]);
    return out;
  }
}
