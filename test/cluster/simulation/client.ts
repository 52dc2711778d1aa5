import type { ClientReply } from './messages.js';
import type { CounterMessage, World } from './sim-node.js';

/**
 * A client: increments ("take a fence token") and reads counters, sending
 * each request to the node it believes leads the partition (a random node
 * otherwise); that node's edge routes it (the production router: served
 * there or forwarded to the leader). An error or no answer within a timeout
 * makes it forget that node and retry elsewhere, until it gives up on the
 * request.
 */
export function sendToNode(world: World, nodeId: string, p: number, counter: string, message: CounterMessage, onReply: (reply: ClientReply) => void): void {
  const { sched, rng } = world;
  const answer = (reply: ClientReply) => sched.after(rng.int(1, 4), () => onReply(reply));
  sched.after(rng.int(1, 4), () => {
    const node = world.node(nodeId);
    if (!node || node.status === 'down') {
      answer({ ok: false, error: 'unavailable' });
      return;
    }
    const inc = node.process.incarnation;
    node.process.post(inc, () =>
      node.request(p, counter, message).then(
        (value) => answer({ ok: true, value }),
        (error: unknown) => answer({ ok: false, error: (error as { code?: string }).code ?? String(error) }),
      ),
    );
  });
}

export class Client {
  private readonly believed = new Map<number, string>();
  private attempt = 0;
  ops = 0;
  succeeded = 0;

  constructor(
    private readonly world: World,
    private readonly active: () => boolean,
    private readonly counters: readonly string[],
  ) {}

  start(): void {
    this.world.sched.after(this.world.rng.int(0, 50), () => this.next());
  }

  private next(): void {
    if (!this.active()) return;
    const { rng, config } = this.world;
    const partition = rng.int(0, config.partitions - 1);
    const counter = rng.pick(this.counters);
    const op = rng.chance(0.7) ? 'inc' : 'get';
    this.ops++;
    this.send(op, partition, counter, this.world.sched.now + 3000);
  }

  private send(op: 'inc' | 'get', partition: number, counter: string, giveUpAt: number): void {
    const { sched, rng } = this.world;
    if (sched.now >= giveUpAt) {
      sched.after(rng.int(5, 30), () => this.next());
      return;
    }
    const attempt = ++this.attempt;
    const nodeId = this.believed.get(partition) ?? rng.pick(this.world.nodeIds());
    let answered = false;
    const retry = () => {
      this.believed.delete(partition);
      sched.after(rng.int(10, 40), () => this.send(op, partition, counter, giveUpAt));
    };
    sendToNode(this.world, nodeId, partition, counter, { op, issuedAt: sched.now }, (reply) => {
      if (answered || attempt !== this.attempt) return;
      answered = true;
      if (reply.ok) {
        this.believed.set(partition, nodeId);
        this.succeeded++;
        sched.after(rng.int(5, 30), () => this.next());
      } else retry();
    });
    sched.after(600, () => {
      if (answered || attempt !== this.attempt) return;
      answered = true;
      retry();
    });
  }
}
