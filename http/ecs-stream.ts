import type { WebSocket } from 'ws';
import { isServiceError, type ActorClient } from '../runtime/index.js';
import { ECS_INDEX_KIND, type SnapshotReply, type TickRecord, type TicksReply } from '../actors/ecs/messages.js';

/**
 * The ECS coordinator's WebSocket fan-out on one node (docs/api/ecs.md).
 *
 * Per index with at least one local subscriber, one follower loop asks the
 * index actor `ticks_since` (read-only; the actor defers the answer until its
 * next tick), so every node, whether it leads the index's partition or not,
 * gets each tick once, in order, and fans it out to its local sockets. The
 * tick's JSON is built once per node, not per socket.
 *
 * Each socket has a cursor (the last tick it was sent). A socket that must
 * replay (a `resume`, or a follower that fell behind the ring) catches up on
 * its own with non-waiting asks, then joins the live stream again; live ticks
 * it has already seen are skipped, so nothing is sent twice or out of order.
 *
 * A socket whose unsent bytes pass `bufferMaxBytes` is closed with 4001
 * (slow_consumer) and never slows the tick or the other sockets.
 */

export const CLOSE_SLOW_CONSUMER = 4001;
export const CLOSE_GOING_AWAY = 1001;
/** Entities per `snapshot` message. */
const SNAPSHOT_PART_ENTITIES = 500;
/** Client messages larger than this are refused with an error message. */
const CLIENT_MESSAGE_BYTES_MAX = 4096;
/** A closed slow socket whose client never reads its close frame is cut off after this. */
const EVICTION_GRACE_MS = 5_000;
const RETRY_DELAY_MS_MIN = 50;
const RETRY_DELAY_MS_MAX = 1_000;

export interface EcsStreamLogger {
  warn(object: object, message: string): void;
  debug(object: object, message: string): void;
}

export interface EcsStreamOptions {
  actors: ActorClient;
  nodeId: string;
  bufferMaxBytes: number;
  logger: EcsStreamLogger;
}

interface Subscriber {
  ws: WebSocket;
  feed: IndexFeed;
  cursor: number;
  catchingUp: boolean;
  /** A resume or snapshot asked while catching up: done when the current catch-up ends. */
  queued: (() => void) | null;
}

interface IndexFeed {
  key: string;
  index: string;
  subscribers: Set<Subscriber>;
  /** The last tick this node's follower received. */
  lastTick: number;
  ready: Promise<void>;
  following: boolean;
  stopped: boolean;
}

export function tickMessage(record: TickRecord): string {
  return JSON.stringify({ type: 'tick', tick: record.tick, at: new Date(record.at_ms).toISOString(), changes: record.changes });
}

function errorMessage(code: string, message: string, extra: object = {}): string {
  return JSON.stringify({ type: 'error', code, message, ...extra });
}

type ClientMessage = { type: 'ping' } | { type: 'resume'; tick: number } | { type: 'snapshot' } | { type: 'malformed'; message: string };

/** A client's frame read as the protocol's messages (docs/api/ecs.md, "Client to server"), or why it is malformed. */
function readClientMessage(text: string | null, bytes: number): ClientMessage {
  const malformed = (message: string): ClientMessage => ({ type: 'malformed', message });
  if (text === null) return malformed('Binary messages are not accepted; send JSON text.');
  if (bytes > CLIENT_MESSAGE_BYTES_MAX) return malformed(`A client message may be at most ${CLIENT_MESSAGE_BYTES_MAX} bytes.`);
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return malformed('The message is not valid JSON.');
  }
  const type = typeof message === 'object' && message !== null ? (message as { type?: unknown }).type : undefined;
  switch (type) {
    case 'ping':
    case 'snapshot':
      return { type };
    case 'resume': {
      const tick = (message as { tick?: unknown }).tick;
      if (typeof tick !== 'number' || !Number.isSafeInteger(tick) || tick < 0) return malformed('resume needs tick, a non-negative integer: the last tick you applied.');
      return { type, tick };
    }
    default:
      return malformed('Unknown message type; expected resume, snapshot or ping.');
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());

export class EcsStreams {
  private readonly feeds = new Map<string, IndexFeed>();
  private closed = false;

  constructor(private readonly options: EcsStreamOptions) {}

  /** Live WebSocket connections on this node, across indexes. */
  get connections(): number {
    let total = 0;
    for (const feed of this.feeds.values()) total += feed.subscribers.size;
    return total;
  }

  /**
   * Takes over an upgraded socket of the index `key` (the actor key) named
   * `index`. `resumeFrom`: the upgrade's `resume` query parameter, the last
   * tick the client applied.
   */
  async attach(key: string, index: string, ws: WebSocket, resumeFrom?: number): Promise<void> {
    if (this.closed) {
      ws.close(CLOSE_GOING_AWAY, 'shutting down');
      return;
    }
    let feed = this.feedFor(key, index);
    const subscriber: Subscriber = { ws, feed, cursor: 0, catchingUp: true, queued: null };
    // Until hello is sent, the socket is not live; client messages wait for it.
    let helloSent = false;
    const early: { text: string | null; bytes: number }[] = [];
    ws.on('message', (data: Buffer, isBinary) => {
      const text = isBinary ? null : data.toString();
      if (!helloSent) {
        if (early.length < 16) early.push({ text, bytes: data.length });
      } else this.onClientMessage(subscriber, text, data.length);
    });
    ws.on('close', () => this.detach(subscriber));
    try {
      await feed.ready;
      // The feed went idle and stopped while this socket waited: join the index's current one.
      while (feed.stopped && !this.closed) {
        feed = subscriber.feed = this.feedFor(key, index);
        await feed.ready;
      }
    } catch {
      ws.close(1011, 'index unavailable');
      return;
    }
    if (ws.readyState !== ws.OPEN || this.closed) return;
    subscriber.cursor = feed.lastTick;
    // A resume known before hello (the query's, or a first message that came before hello was sent) starts
    // the stream there: hello names that tick and the replay follows it, so no live tick goes out first.
    let resume = resumeFrom;
    if (resume === undefined && early.length > 0) {
      const first = readClientMessage(early[0].text, early[0].bytes);
      if (first.type === 'resume') {
        resume = first.tick;
        early.shift();
      }
    }
    let aheadOf: number | undefined;
    if (resume !== undefined) {
      if (resume > feed.lastTick) aheadOf = resume;
      else subscriber.cursor = resume;
    }
    feed.subscribers.add(subscriber);
    if (!feed.following) {
      feed.following = true;
      void this.follow(feed);
    }
    const status = await this.options.actors
      .ask<TicksReply>(ECS_INDEX_KIND, key, { op: 'ticks_since', since: feed.lastTick, wait: false }, { readOnly: true })
      .catch(() => null);
    this.reportConnections(feed);
    this.send(subscriber, JSON.stringify({
      type: 'hello',
      protocol: 1,
      index,
      tick: subscriber.cursor,
      running: status?.running ?? false,
      tick_rate_ms: status?.tick_rate_ms ?? null,
      oldest_tick: status?.oldest_tick ?? null,
    }));
    helloSent = true;
    subscriber.catchingUp = false;
    if (aheadOf !== undefined) this.sendResumeAhead(subscriber, aheadOf);
    // Ticks committed while hello was prepared, or after the resume's tick: sent now, in order.
    if (feed.lastTick > subscriber.cursor) void this.catchUp(subscriber);
    for (const { text, bytes } of early) this.onClientMessage(subscriber, text, bytes);
  }

  /** Closes every socket with 1001 and stops the followers (node shutdown). */
  close(): void {
    this.closed = true;
    for (const feed of this.feeds.values()) {
      feed.stopped = true;
      for (const subscriber of feed.subscribers) subscriber.ws.close(CLOSE_GOING_AWAY, 'shutting down');
    }
    this.feeds.clear();
  }

  private feedFor(key: string, index: string): IndexFeed {
    let feed = this.feeds.get(key);
    if (feed && !feed.stopped) return feed;
    const created: IndexFeed = { key, index, subscribers: new Set(), lastTick: 0, ready: Promise.resolve(), following: false, stopped: false };
    created.ready = this.options.actors
      .ask<TicksReply>(ECS_INDEX_KIND, key, { op: 'ticks_since', since: Number.MAX_SAFE_INTEGER, wait: false }, { readOnly: true })
      .then((reply) => {
        created.lastTick = reply.tick;
      });
    created.ready.catch(() => {
      if (this.feeds.get(key) === created) this.feeds.delete(key);
      created.stopped = true;
    });
    this.feeds.set(key, created);
    feed = created;
    return feed;
  }

  /** The follower loop: one waiting ask at a time, until the index has no local subscriber. */
  private async follow(feed: IndexFeed): Promise<void> {
    const { actors, nodeId, logger } = this.options;
    let delay = RETRY_DELAY_MS_MIN;
    while (!feed.stopped) {
      if (feed.subscribers.size === 0) {
        this.stopFeed(feed);
        return;
      }
      let reply: TicksReply;
      try {
        reply = await actors.ask<TicksReply>(
          ECS_INDEX_KIND,
          feed.key,
          { op: 'ticks_since', since: feed.lastTick, wait: true, node_id: nodeId, connections: feed.subscribers.size },
          { readOnly: true },
        );
        delay = RETRY_DELAY_MS_MIN;
      } catch (error) {
        // flow_interrupted: the wait timed out (an index that is not ticking) or the actor moved; ask again.
        if (isServiceError(error) && error.code === 'flow_interrupted') continue;
        logger.warn({ err: error, index: feed.index }, 'ECS follower ask failed; retrying');
        await sleep(delay);
        delay = Math.min(delay * 2, RETRY_DELAY_MS_MAX);
        continue;
      }
      if (feed.stopped) return;
      if (reply.gap) {
        // This node fell behind the ring (a long partition outage): every socket resyncs with a snapshot.
        feed.lastTick = reply.tick;
        for (const subscriber of feed.subscribers) if (!subscriber.catchingUp) void this.catchUp(subscriber);
        continue;
      }
      if (reply.ticks.length === 0 && reply.tick < feed.lastTick) {
        // The index's tick went back (its data was removed): follow it from where it is.
        feed.lastTick = reply.tick;
        continue;
      }
      for (const record of reply.ticks) this.broadcast(feed, record);
    }
  }

  private broadcast(feed: IndexFeed, record: TickRecord): void {
    if (record.tick <= feed.lastTick) return;
    feed.lastTick = record.tick;
    let data: Buffer | null = null;
    for (const subscriber of feed.subscribers) {
      if (subscriber.catchingUp || subscriber.cursor >= record.tick) continue;
      if (subscriber.cursor < record.tick - 1) {
        void this.catchUp(subscriber);
        continue;
      }
      data ??= Buffer.from(tickMessage(record));
      if (this.send(subscriber, data)) subscriber.cursor = record.tick;
    }
  }

  /** Sends ticks after the subscriber's cursor (or a snapshot when they left the ring) until it is live again. */
  private async catchUp(subscriber: Subscriber, snapshotFirst = false): Promise<void> {
    const { actors } = this.options;
    const { feed, ws } = subscriber;
    subscriber.catchingUp = true;
    let wantSnapshot = snapshotFirst;
    try {
      for (let rounds = 0; rounds < 1_000 && ws.readyState === ws.OPEN; rounds++) {
        if (wantSnapshot) {
          const snapshot = await actors.ask<SnapshotReply>(ECS_INDEX_KIND, feed.key, { op: 'snapshot' }, { readOnly: true });
          this.sendSnapshot(subscriber, snapshot);
          subscriber.cursor = snapshot.tick;
          wantSnapshot = false;
          continue;
        }
        const reply = await actors.ask<TicksReply>(ECS_INDEX_KIND, feed.key, { op: 'ticks_since', since: subscriber.cursor, wait: false }, { readOnly: true });
        if (reply.gap) {
          wantSnapshot = true;
          continue;
        }
        for (const record of reply.ticks) {
          if (record.tick !== subscriber.cursor + 1) break;
          if (!this.send(subscriber, tickMessage(record))) return;
          subscriber.cursor = record.tick;
        }
        if (reply.ticks.length === 0 || subscriber.cursor >= feed.lastTick) break;
      }
    } catch (error) {
      this.options.logger.warn({ err: error, index: feed.index }, 'ECS catch-up failed');
      this.send(subscriber, errorMessage('stream_unavailable', 'The index could not be read; resume from your last tick to try again.', { tick: subscriber.cursor }));
    } finally {
      subscriber.catchingUp = false;
      const queued = subscriber.queued;
      subscriber.queued = null;
      if (queued) queued();
      // Live ticks that arrived during the last answer.
      else if (ws.readyState === ws.OPEN && subscriber.cursor < feed.lastTick && !subscriber.catchingUp) void this.catchUp(subscriber);
    }
  }

  private sendSnapshot(subscriber: Subscriber, snapshot: SnapshotReply): void {
    const parts = Math.max(1, Math.ceil(snapshot.entities.length / SNAPSHOT_PART_ENTITIES));
    for (let part = 0; part < parts; part++) {
      const entities = snapshot.entities.slice(part * SNAPSHOT_PART_ENTITIES, (part + 1) * SNAPSHOT_PART_ENTITIES);
      if (!this.send(subscriber, JSON.stringify({ type: 'snapshot', tick: snapshot.tick, part: part + 1, parts, entities }))) return;
    }
  }

  private onClientMessage(subscriber: Subscriber, text: string | null, bytes: number): void {
    const message = readClientMessage(text, bytes);
    switch (message.type) {
      case 'malformed':
        this.send(subscriber, errorMessage('malformed_message', message.message));
        return;
      case 'ping':
        this.send(subscriber, JSON.stringify({ type: 'pong', tick: subscriber.cursor }));
        return;
      case 'resume': {
        const { tick } = message;
        this.whenIdle(subscriber, () => {
          if (tick > subscriber.feed.lastTick) {
            this.sendResumeAhead(subscriber, tick);
            return;
          }
          // The live stream has started: ticks after `tick` may already have gone out. The marker tells the
          // client where the replay starts, so it drops what came before it instead of applying ticks twice
          // or out of order.
          this.send(subscriber, JSON.stringify({ type: 'resumed', tick }));
          subscriber.cursor = tick;
          void this.catchUp(subscriber);
        });
        return;
      }
      case 'snapshot':
        this.whenIdle(subscriber, () => void this.catchUp(subscriber, true));
        return;
    }
  }

  private sendResumeAhead(subscriber: Subscriber, tick: number): void {
    this.send(subscriber, errorMessage('resume_ahead', `Tick ${tick} has not happened yet; the stream goes on from tick ${subscriber.cursor}.`, { tick: subscriber.cursor }));
  }

  private whenIdle(subscriber: Subscriber, run: () => void): void {
    if (subscriber.catchingUp) subscriber.queued = run;
    else run();
  }

  /** Sends unless the socket is closed; evicts it when its unsent bytes are past the bound. */
  private send(subscriber: Subscriber, data: string | Buffer): boolean {
    const { ws } = subscriber;
    if (ws.readyState !== ws.OPEN) return false;
    if (ws.bufferedAmount > this.options.bufferMaxBytes) {
      this.evict(subscriber);
      return false;
    }
    ws.send(data, { binary: false });
    return true;
  }

  private evict(subscriber: Subscriber): void {
    const { ws, feed } = subscriber;
    this.options.logger.debug({ index: feed.index, buffered: ws.bufferedAmount }, 'ECS subscriber too slow: closing it');
    ws.close(CLOSE_SLOW_CONSUMER, 'slow_consumer');
    setTimeout(() => ws.terminate(), EVICTION_GRACE_MS).unref();
    this.detach(subscriber);
  }

  private detach(subscriber: Subscriber): void {
    const { feed } = subscriber;
    if (!feed.subscribers.delete(subscriber)) return;
    this.reportConnections(feed);
  }

  private stopFeed(feed: IndexFeed): void {
    feed.stopped = true;
    feed.following = false;
    if (this.feeds.get(feed.key) === feed) this.feeds.delete(feed.key);
  }

  /** Tells the index this node's connection count at once (the follower refreshes it with every ask). */
  private reportConnections(feed: IndexFeed): void {
    this.options.actors
      .ask(ECS_INDEX_KIND, feed.key, { op: 'connections', node_id: this.options.nodeId, connections: feed.subscribers.size }, { readOnly: true })
      .catch(() => undefined);
  }
}
