/**
 * Lock histories for the fault tests and the fault bench (item 5 of the
 * cluster-faults issue): a load generator that records every lock operation
 * it makes against a cluster, and a pure checker of such a history.
 *
 * The load: N clients take and release locks on K keys (short TTL, a few
 * abandoned to expire) through random nodes, plus one client taking a stream
 * of long-lived locks on fresh keys, all read back at the end. Every
 * operation is recorded with its invoke and complete times (one clock, this
 * process's), the node it was sent to, the HTTP status, error code,
 * Retry-After and result (lock_id, fence_token).
 *
 * The checker (checkHistory) knows nothing of HTTP or processes: the unit
 * tests feed it hand-made histories (test/unit/lock-history.test.ts). What it
 * checks, and how it treats uncertainty:
 * - an operation's effect happens at some instant between its invoke and its
 *   complete; an operation without a definitive answer (no response, a
 *   timeout, a 503 other than not_enough_replicas) may or may not have taken
 *   effect, at any time after its invoke;
 * - (a) lost writes: every acknowledged acquisition that was neither released
 *   nor can have expired is still held, with its lock_id and fence token, when
 *   read back at the end (the long-lived locks all are); a release answered
 *   `lock_not_held` while its acknowledged lock was certainly unexpired is a
 *   lost acquisition too; an acknowledged release must not come back; the
 *   fence token read back is never below one acknowledged earlier;
 * - (b) fence order: an acquisition acknowledged before another one of the
 *   same key was invoked has a smaller fence token (acknowledgement order, for
 *   the pairs whose order is certain); no two acquisitions share a token;
 * - (c) mutual exclusion: the intervals in which two acquisitions of a key
 *   were certainly both held do not overlap. An acquisition is certainly held
 *   from its acknowledgement until its release is invoked or its TTL, counted
 *   from its invoke, runs out;
 * - (d) refusals: every answer that is not a success is a documented 409
 *   (`lock_held` to an acquire, `lock_not_held` to a release) or a 503 with an
 *   error code and a Retry-After header; a request left without an answer
 *   (connection refused or reset, timeout) is only expected from a node that
 *   was killed or paused at the time. A refused write (503
 *   not_enough_replicas) must not appear in the read-back;
 * - (e) availability: how long keys could not be written (see
 *   availabilityWindows).
 */

export type LockOpKind = 'acquire' | 'release' | 'read';

export interface LockOp {
  id: number;
  /** 'c3' for the 4th churn client, 'long' for the long-lived stream, 'readback'. */
  client: string;
  kind: LockOpKind;
  key: string;
  /** acquire and release: the owner sent. */
  owner_id?: string;
  /** release: the lock released (and `of`, the id of its acquire op). */
  lock_id?: string;
  of?: number;
  /** acquire: the TTL asked for, in ms. */
  ttl_ms?: number;
  /** The node the request was sent to. */
  node: string;
  invoke_ms: number;
  complete_ms: number;
  /** HTTP status; 0 when no answer came (connection refused or reset, timeout). */
  status: number;
  /** The error code of a 4xx/5xx answer. */
  code?: string;
  retry_after?: string | null;
  /** The transport error, when status is 0. */
  error?: string;
  /** acquire 200: the lock granted; read 200: what was read. */
  result?: { lock_id: string | null; fence_token: number; is_locked?: boolean; owner_id?: string | null };
}

/** A node that was killed or paused (its unanswered requests are expected) from..to. */
export interface NodeFault {
  node: string;
  from_ms: number;
  to_ms: number;
}

export interface LockHistory {
  ops: LockOp[];
  /** When the fault was injected and when it was healed (etcd back, node restarted or resumed). */
  fault?: { label: string; start_ms: number; end_ms: number };
  node_faults: NodeFault[];
  /** The keys of the churn clients (availability is measured on these). */
  churn_keys: string[];
  load_start_ms: number;
  load_end_ms: number;
}

// ---------------------------------------------------------------- the checker

/** Margin for comparing this process's clock with the server's expiry times (same machine). */
export const CLOCK_MARGIN_MS = 50;
/** A wait for a key longer than this counts as an outage even if it ended in a success. */
export const SLOW_MS = 1_000;

export type Outcome = 'ok' | 'refused' | 'not_written' | 'unknown';

/** What an operation's answer says about its effect. */
export function outcomeOf(op: LockOp): Outcome {
  if (op.kind === 'acquire' && op.status === 200) return 'ok';
  if (op.kind === 'release' && op.status === 204) return 'ok';
  if (op.kind === 'read' && op.status === 200) return 'ok';
  if (op.status === 409) return 'refused';
  // Refused before anything was written (docs/cluster.md, docs/errors.md).
  if (op.status === 503 && (op.code === 'not_enough_replicas' || op.code === 'actor_overloaded' || op.code === 'shutting_down' || op.code === 'server_busy')) return 'not_written';
  if (op.status >= 400 && op.status < 500) return 'refused';
  return 'unknown';
}

/** The leader answered (a success or a 409 from the lock's state): the key was writable. */
export function served(op: LockOp): boolean {
  const outcome = outcomeOf(op);
  return (outcome === 'ok' && op.kind !== 'read') || op.status === 409;
}

export interface Violation {
  property: 'lost_write' | 'fence_order' | 'mutual_exclusion' | 'refusal';
  key: string;
  message: string;
}

export interface Outage {
  key: string;
  start_ms: number;
  /** First served answer for the key after start (Infinity: none before the load stopped). */
  end_ms: number;
  failed: number;
}

export interface AvailabilityWindows {
  /** From the fault's start until every churn key was writable again for good (the end of the last outage), ms. */
  from_start_ms: number;
  /** From the fault's end (etcd back, node resumed or restarted) until the end of the last outage, ms (0 if all ended before). */
  from_end_ms: number;
  /** The longest single outage of one key that ended after the fault started, ms. */
  longest_ms: number;
  longest_key?: string;
  /** Outages that ended after the fault started. */
  outages: number;
  /** Some outage had not ended when the load stopped. */
  unrecovered: boolean;
}

export interface HistoryReport {
  counts: {
    ops: number;
    acquired: number;
    released: number;
    lock_held: number;
    not_written: number;
    unknown: number;
    no_answer: number;
    long_lived_acked: number;
    long_lived_checked: number;
    held_checked: number;
  };
  violations: Violation[];
  lost_writes: number;
  fence_regressions: number;
  overlapping_holders: number;
  bad_refusals: number;
  windows: AvailabilityWindows;
}

interface Held {
  op: LockOp;
  lock_id: string;
  fence: number;
  release?: LockOp;
}

const fmt = (ms: number) => `${Math.round(ms)}`;

export function checkHistory(history: LockHistory): HistoryReport {
  const violations: Violation[] = [];
  const byKey = new Map<string, LockOp[]>();
  for (const op of history.ops) {
    const list = byKey.get(op.key) ?? [];
    list.push(op);
    byKey.set(op.key, list);
  }
  const releasesOf = new Map<number, LockOp>();
  for (const op of history.ops) if (op.kind === 'release' && op.of !== undefined) releasesOf.set(op.of, op);

  const counts = { ops: history.ops.length, acquired: 0, released: 0, lock_held: 0, not_written: 0, unknown: 0, no_answer: 0, long_lived_acked: 0, long_lived_checked: 0, held_checked: 0 };
  for (const op of history.ops) {
    const outcome = outcomeOf(op);
    if (op.kind === 'acquire' && outcome === 'ok') counts.acquired++;
    if (op.kind === 'release' && outcome === 'ok') counts.released++;
    if (op.code === 'lock_held') counts.lock_held++;
    if (outcome === 'not_written') counts.not_written++;
    if (outcome === 'unknown' && op.kind !== 'read') counts.unknown++;
    if (op.status === 0) counts.no_answer++;
    if (op.client === 'long' && op.kind === 'acquire' && outcome === 'ok') counts.long_lived_acked++;
  }

  // (d) every refusal is documented; unanswered requests only from a faulted node.
  for (const op of history.ops) checkRefusal(op, history.node_faults, violations);

  for (const [key, ops] of byKey) {
    const acquisitions: Held[] = [];
    for (const op of ops) {
      if (op.kind !== 'acquire' || outcomeOf(op) !== 'ok' || !op.result?.lock_id) continue;
      acquisitions.push({ op, lock_id: op.result.lock_id, fence: op.result.fence_token, release: releasesOf.get(op.id) });
    }
    const reads = ops.filter((op) => op.kind === 'read' && outcomeOf(op) === 'ok' && op.result);

    // (b) fence order.
    const seen = new Map<number, string>();
    for (const a of acquisitions) {
      const other = seen.get(a.fence);
      if (other !== undefined && other !== a.lock_id) violations.push({ property: 'fence_order', key, message: `fence token ${a.fence} given to two locks (${other}, ${a.lock_id})` });
      seen.set(a.fence, a.lock_id);
    }
    const byComplete = [...acquisitions].sort((x, y) => x.op.complete_ms - y.op.complete_ms);
    const byInvoke = [...acquisitions].sort((x, y) => x.op.invoke_ms - y.op.invoke_ms);
    let i = 0;
    let best: Held | undefined;
    for (const b of byInvoke) {
      while (i < byComplete.length && byComplete[i].op.complete_ms < b.op.invoke_ms) {
        if (!best || byComplete[i].fence > best.fence) best = byComplete[i];
        i++;
      }
      if (best && best.fence >= b.fence && best.lock_id !== b.lock_id) {
        violations.push({
          property: 'fence_order',
          key,
          message: `fence token went back: ${best.lock_id} acknowledged with ${best.fence} at ${fmt(best.op.complete_ms)}, then ${b.lock_id} (invoked at ${fmt(b.op.invoke_ms)}) got ${b.fence}`,
        });
      }
    }

    // (c) mutual exclusion: intervals in which each acquisition was certainly held.
    const intervals = acquisitions
      .map((a) => ({ a, from: a.op.complete_ms, to: certainEnd(a) }))
      .filter((x) => x.to > x.from)
      .sort((x, y) => x.from - y.from);
    let open: { a: Held; from: number; to: number } | undefined;
    for (const x of intervals) {
      if (open && x.from < open.to) {
        violations.push({
          property: 'mutual_exclusion',
          key,
          message: `${open.a.lock_id} (fence ${open.a.fence}) held ${fmt(open.from)}..${fmt(open.to)} and ${x.a.lock_id} (fence ${x.a.fence}) held from ${fmt(x.from)}`,
        });
      }
      if (!open || x.to > open.to) open = x;
    }

    // (a) lost writes, during the run: a release refused while its lock was certainly held.
    for (const a of acquisitions) {
      const r = a.release;
      if (r && r.status === 409 && r.code === 'lock_not_held' && r.complete_ms < expiresNoEarlierThan(a)) {
        violations.push({ property: 'lost_write', key, message: `release of ${a.lock_id} (fence ${a.fence}) answered lock_not_held at ${fmt(r.complete_ms)}, before the lock could expire (${fmt(expiresNoEarlierThan(a))}): the acquisition was lost` });
      }
    }

    // (a) lost writes, at the read-back.
    for (const read of reads) {
      const seenAt = read.result!;
      const before = acquisitions.filter((a) => a.op.complete_ms < read.invoke_ms);
      const maxFence = Math.max(0, ...before.map((a) => a.fence));
      if (seenAt.fence_token < maxFence) violations.push({ property: 'lost_write', key, message: `read back fence token ${seenAt.fence_token}, below the acknowledged ${maxFence}` });
      // The acquisitions certainly still held at the read: acknowledged, no release sent before the read, certainly unexpired.
      for (const a of before) {
        const releaseSent = a.release !== undefined && a.release.invoke_ms < read.complete_ms;
        if (releaseSent || read.complete_ms >= expiresNoEarlierThan(a)) continue;
        if (a.op.client === 'long') counts.long_lived_checked++;
        else counts.held_checked++;
        if (!seenAt.is_locked || seenAt.lock_id !== a.lock_id || seenAt.fence_token !== a.fence) {
          violations.push({
            property: 'lost_write',
            key,
            message: `${a.lock_id} (fence ${a.fence}, acknowledged at ${fmt(a.op.complete_ms)} through ${a.op.node}) was held, but the read-back shows ${seenAt.is_locked ? `${seenAt.lock_id} (fence ${seenAt.fence_token})` : 'the key free'}`,
          });
        }
      }
      if (seenAt.is_locked && seenAt.lock_id) {
        const released = acquisitions.find((a) => a.lock_id === seenAt.lock_id && a.release && outcomeOf(a.release) === 'ok' && a.release.complete_ms < read.invoke_ms);
        if (released) violations.push({ property: 'lost_write', key, message: `${released.lock_id} was released (204 at ${fmt(released.release!.complete_ms)}) but reads back as held` });
        const known = acquisitions.some((a) => a.lock_id === seenAt.lock_id);
        if (!known) {
          const attempts = ops.filter((op) => op.kind === 'acquire' && op.owner_id === seenAt.owner_id);
          if (attempts.length > 0 && attempts.every((op) => outcomeOf(op) !== 'unknown' && outcomeOf(op) !== 'ok')) {
            violations.push({ property: 'refusal', key, message: `the read-back shows ${seenAt.owner_id}'s lock, whose acquisition was refused (${attempts.map((op) => `${op.status} ${op.code ?? ''}`.trim()).join(', ')})` });
          }
        }
      }
    }
  }

  const count = (p: Violation['property']) => violations.filter((v) => v.property === p).length;
  return {
    counts,
    violations,
    lost_writes: count('lost_write'),
    fence_regressions: count('fence_order'),
    overlapping_holders: count('mutual_exclusion'),
    bad_refusals: count('refusal'),
    windows: availabilityWindows(history),
  };
}

/** The lock cannot have expired before this (its TTL counted from the acquire's invoke, less the clock margin). */
function expiresNoEarlierThan(a: Held): number {
  return a.op.invoke_ms + (a.op.ttl_ms ?? Infinity) - CLOCK_MARGIN_MS;
}

function certainEnd(a: Held): number {
  const expiry = expiresNoEarlierThan(a);
  return a.release ? Math.min(a.release.invoke_ms, expiry) : expiry;
}

function checkRefusal(op: LockOp, nodeFaults: NodeFault[], violations: Violation[]): void {
  if (op.status >= 200 && op.status < 300) return;
  const what = `${op.kind} ${op.key} through ${op.node} at ${fmt(op.invoke_ms)}`;
  if (op.status === 409) {
    const documented = op.kind === 'acquire' ? 'lock_held' : op.kind === 'release' ? 'lock_not_held' : undefined;
    if (op.code !== documented) violations.push({ property: 'refusal', key: op.key, message: `${what}: 409 ${op.code ?? '(no code)'}, not the documented ${documented ?? 'answer'}` });
    return;
  }
  if (op.status === 503) {
    if (!op.code || op.retry_after === undefined || op.retry_after === null || op.retry_after === '') {
      violations.push({ property: 'refusal', key: op.key, message: `${what}: 503 ${op.code ?? '(no code)'} without Retry-After` });
    }
    return;
  }
  if (op.status === 0) {
    const expected = nodeFaults.some((f) => f.node === op.node && op.invoke_ms <= f.to_ms && op.complete_ms >= f.from_ms);
    if (!expected) violations.push({ property: 'refusal', key: op.key, message: `${what}: no answer (${op.error ?? 'unknown error'}) from a node that was neither killed nor paused` });
    return;
  }
  violations.push({ property: 'refusal', key: op.key, message: `${what}: ${op.status} ${op.code ?? ''}`.trim() });
}

/**
 * (e) When the churn keys could not be written. For each operation on a key:
 * the key is back at the first served answer (a success or a 409, from any
 * client) completed at or after the operation's invoke. An operation that
 * failed (no definitive answer) or waited SLOW_MS or more opens an outage of
 * its key from its invoke to that moment; overlapping ones merge.
 */
export function availabilityWindows(history: LockHistory): AvailabilityWindows {
  const fault = history.fault;
  const faultStart = fault?.start_ms ?? history.load_start_ms;
  const faultEnd = fault?.end_ms ?? faultStart;
  const outages = keyOutages(history);
  const relevant = outages.filter((o) => o.end_ms > faultStart);
  const unrecovered = relevant.some((o) => !Number.isFinite(o.end_ms));
  const ends = relevant.map((o) => (Number.isFinite(o.end_ms) ? o.end_ms : history.load_end_ms));
  const lastEnd = ends.length > 0 ? Math.max(...ends) : faultStart;
  let longest = 0;
  let longestKey: string | undefined;
  for (const o of relevant) {
    const length = (Number.isFinite(o.end_ms) ? o.end_ms : history.load_end_ms) - o.start_ms;
    if (length > longest) {
      longest = length;
      longestKey = o.key;
    }
  }
  return {
    from_start_ms: Math.max(0, lastEnd - faultStart),
    from_end_ms: Math.max(0, lastEnd - faultEnd),
    longest_ms: longest,
    longest_key: longestKey,
    outages: relevant.length,
    unrecovered,
  };
}

/** Every outage of a churn key (see availabilityWindows), in no particular order. */
export function keyOutages(history: LockHistory): Outage[] {
  const outages: Outage[] = [];
  const keys = new Set(history.churn_keys);
  const byKey = new Map<string, LockOp[]>();
  for (const op of history.ops) {
    if (!keys.has(op.key) || op.kind === 'read') continue;
    const list = byKey.get(op.key) ?? [];
    list.push(op);
    byKey.set(op.key, list);
  }
  for (const [key, ops] of byKey) {
    const servedAt = ops.filter(served).map((op) => op.complete_ms).sort((a, b) => a - b);
    const firstServedFrom = (t: number) => {
      let lo = 0;
      let hi = servedAt.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (servedAt[mid] < t) lo = mid + 1;
        else hi = mid;
      }
      return lo < servedAt.length ? servedAt[lo] : Infinity;
    };
    const opened: Outage[] = [];
    for (const op of [...ops].sort((a, b) => a.invoke_ms - b.invoke_ms)) {
      const back = firstServedFrom(op.invoke_ms);
      const failed = !served(op);
      if (!failed && back - op.invoke_ms < SLOW_MS) continue;
      const last = opened.at(-1);
      if (last && op.invoke_ms <= last.end_ms) {
        last.end_ms = Math.max(last.end_ms, back);
        if (failed) last.failed++;
      } else opened.push({ key, start_ms: op.invoke_ms, end_ms: back, failed: failed ? 1 : 0 });
    }
    outages.push(...opened);
  }
  return outages;
}

/** A few lines for the test output and the bench's progress. */
export function formatReport(label: string, report: HistoryReport): string {
  const c = report.counts;
  const w = report.windows;
  const lines = [
    `${label}: ${c.ops} ops; ${c.acquired} acquired, ${c.released} released, ${c.lock_held} lock_held, ${c.not_written} refused unwritten, ${c.unknown} unknown outcome (${c.no_answer} without answer); ` +
      `${c.held_checked} held churn locks and ${c.long_lived_checked}/${c.long_lived_acked} long-lived locks read back`,
    `${label}: safety: ${report.lost_writes} lost acknowledged writes, ${report.fence_regressions} fence regressions, ${report.overlapping_holders} overlapping holders, ${report.bad_refusals} unclear refusals`,
    `${label}: availability: every key writable again ${Math.round(w.from_start_ms)} ms after the fault started, ${Math.round(w.from_end_ms)} ms after it ended; ` +
      `longest outage of one key ${Math.round(w.longest_ms)} ms${w.longest_key ? ` (${w.longest_key})` : ''}; ${w.outages} outages${w.unrecovered ? '; NOT RECOVERED when the load stopped' : ''}`,
  ];
  for (const v of report.violations.slice(0, 20)) lines.push(`${label}: VIOLATION ${v.property} ${v.key}: ${v.message}`);
  if (report.violations.length > 20) lines.push(`${label}: ... ${report.violations.length - 20} more violations`);
  return lines.join('\n');
}

// ---------------------------------------------------------------- the load

export interface LoadNode {
  nodeId: string;
  url: string;
}

export interface LockLoadOptions {
  /** The nodes to send requests to now (those up: not killed, not paused). Asked before each request. */
  nodes(): LoadNode[];
  token: string;
  namespace: string;
  clients?: number;
  keys?: number;
  /** TTL of the churn locks (default 3 s). */
  ttl_seconds?: number;
  /** Share of churn acquisitions never released, left to expire (default 0.03). */
  abandon?: number;
  /** One long-lived acquisition every this many ms (default 100; 0: none). */
  long_lived_every_ms?: number;
  /**
   * Availability probes: every this many ms, for each churn key, one acquire
   * (released at once when granted), sent whether or not earlier probes have
   * answered (at most 48 in flight per key: 12 s of probes, beyond FORWARD_DEADLINE_MS). The churn clients alone are a
   * closed loop: during an outage they all end up waiting on keys that are
   * down and stop sampling the others. Default 250; 0: none.
   */
  probe_every_ms?: number;
  /** Per-request timeout (default 15 s, beyond FORWARD_DEADLINE_MS). */
  timeout_ms?: number;
  random?: () => number;
}

export interface LockLoad {
  /** Stops the clients, waits for their requests in flight, and returns the history (without read-back). */
  stop(): Promise<LockHistory>;
  history: LockHistory;
}

export const now = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Answer {
  status: number;
  code?: string;
  retry_after?: string | null;
  error?: string;
  body?: any;
}

async function request(url: string, method: string, path: string, token: string, body: unknown, timeout_ms: number): Promise<Answer> {
  try {
    const response = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeout_ms),
    });
    const text = await response.text();
    let parsed: any = null;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: response.status, code: typeof parsed?.code === 'string' ? parsed.code : undefined, retry_after: response.headers.get('retry-after'), body: parsed };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return { status: 0, error: cause ? `${String(error)} (${cause})` : String(error) };
  }
}

export const lockPath = (namespace: string, key: string) => `/api/v1/distributed-state/${encodeURIComponent(namespace)}/${encodeURIComponent(key)}/lock`;

/** Starts the clients; stop() ends them. */
export function startLockLoad(options: LockLoadOptions): LockLoad {
  const random = options.random ?? Math.random;
  const clients = options.clients ?? 12;
  const keyCount = options.keys ?? 20;
  const ttl_s = options.ttl_seconds ?? 3;
  const abandon = options.abandon ?? 0.03;
  const longEvery = options.long_lived_every_ms ?? 100;
  const timeout_ms = options.timeout_ms ?? 15_000;
  const probeEvery = options.probe_every_ms ?? 250;
  const churnKeys = Array.from({ length: keyCount }, (_, i) => `k${i}`);
  const history: LockHistory = { ops: [], node_faults: [], churn_keys: churnKeys, load_start_ms: now(), load_end_ms: 0 };
  let nextId = 0;
  let running = true;
  let owners = 0;

  const pick = (): LoadNode | undefined => {
    const nodes = options.nodes();
    return nodes.length === 0 ? undefined : nodes[Math.floor(random() * nodes.length)];
  };

  const record = async (client: string, kind: LockOpKind, key: string, method: string, body: unknown, extra: Partial<LockOp>): Promise<LockOp | undefined> => {
    const node = pick();
    if (!node) return undefined;
    const invoke_ms = now();
    const answer = await request(node.url, method, lockPath(options.namespace, key), options.token, body, timeout_ms);
    const op: LockOp = {
      id: nextId++,
      client,
      kind,
      key,
      node: node.nodeId,
      invoke_ms,
      complete_ms: now(),
      status: answer.status,
      ...extra,
    };
    if (answer.code !== undefined) op.code = answer.code;
    if (answer.status >= 400) op.retry_after = answer.retry_after ?? null;
    if (answer.error !== undefined) op.error = answer.error;
    if (kind === 'acquire' && answer.status === 200) op.result = { lock_id: answer.body.lock_id, fence_token: answer.body.fence_token };
    if (kind === 'read' && answer.status === 200) {
      op.result = { lock_id: answer.body.lock_id, fence_token: answer.body.fence_token, is_locked: answer.body.is_locked, owner_id: answer.body.owner_id };
    }
    history.ops.push(op);
    return op;
  };

  const churn = async (c: number) => {
    const client = `c${c}`;
    while (running) {
      const key = churnKeys[Math.floor(random() * churnKeys.length)];
      const owner_id = `${client}-${owners++}`;
      const acquired = await record(client, 'acquire', key, 'POST', { owner_id, ttl_seconds: ttl_s }, { owner_id, ttl_ms: ttl_s * 1000 });
      if (!acquired) {
        await sleep(50);
        continue;
      }
      if (acquired.status === 200) {
        await sleep(random() * 30);
        if (random() < abandon) continue;
        // Released through any node, possibly another one.
        const lock_id = acquired.result!.lock_id!;
        for (;;) {
          const released = await record(client, 'release', key, 'DELETE', { lock_id, owner_id }, { owner_id, lock_id, of: acquired.id });
          if (released) break;
          await sleep(50);
        }
      } else if (acquired.status === 409) {
        await sleep(5 + random() * 20);
      } else {
        await sleep(50 + random() * 100);
      }
    }
  };

  const longLived = async () => {
    let n = 0;
    while (running) {
      const started = now();
      const key = `long-${n++}`;
      const owner_id = `long-${n}`;
      await record('long', 'acquire', key, 'POST', { owner_id, ttl_seconds: 3600 }, { owner_id, ttl_ms: 3_600_000 });
      await sleep(Math.max(0, longEvery - (now() - started)));
    }
  };

  const probing = new Set<Promise<void>>();
  const probe = async (key: string) => {
    const owner_id = `probe-${owners++}`;
    const acquired = await record('probe', 'acquire', key, 'POST', { owner_id, ttl_seconds: ttl_s }, { owner_id, ttl_ms: ttl_s * 1000 });
    if (acquired?.status === 200) {
      const lock_id = acquired.result!.lock_id!;
      await record('probe', 'release', key, 'DELETE', { lock_id, owner_id }, { owner_id, lock_id, of: acquired.id });
    }
  };
  const prober = async () => {
    const inFlight = new Map<string, number>();
    while (running) {
      const started = now();
      for (const key of churnKeys) {
        if ((inFlight.get(key) ?? 0) >= 48) continue;
        inFlight.set(key, (inFlight.get(key) ?? 0) + 1);
        const done: Promise<void> = probe(key).finally(() => {
          inFlight.set(key, inFlight.get(key)! - 1);
          probing.delete(done);
        });
        probing.add(done);
      }
      await sleep(Math.max(0, probeEvery - (now() - started)));
    }
    while (probing.size > 0) await Promise.all([...probing]);
  };

  const workers = Array.from({ length: clients }, (_, c) => churn(c));
  if (longEvery > 0) workers.push(longLived());
  if (probeEvery > 0) workers.push(prober());

  return {
    history,
    async stop() {
      running = false;
      await Promise.all(workers);
      history.load_end_ms = now();
      return history;
    },
  };
}

/**
 * Reads back every key of the history (the churn keys and every key a
 * long-lived acquisition was attempted on), retrying a read that gets no
 * definitive answer for up to `timeout_ms`. The reads are added to the
 * history; returns the keys that could not be read.
 */
export async function readBack(history: LockHistory, options: { nodes(): LoadNode[]; token: string; namespace: string; timeout_ms?: number; concurrency?: number }): Promise<string[]> {
  const keys = [...new Set(history.ops.filter((op) => op.kind !== 'read').map((op) => op.key))];
  const deadline = now() + (options.timeout_ms ?? 30_000);
  let nextId = Math.max(0, ...history.ops.map((op) => op.id)) + 1;
  const unread: string[] = [];
  let index = 0;
  const worker = async () => {
    while (index < keys.length) {
      const key = keys[index++];
      for (let attempt = 0; ; attempt++) {
        const nodes = options.nodes();
        const node = nodes[attempt % nodes.length];
        const invoke_ms = now();
        const answer = await request(node.url, 'GET', lockPath(options.namespace, key), options.token, undefined, 10_000);
        if (answer.status === 200) {
          history.ops.push({
            id: nextId++,
            client: 'readback',
            kind: 'read',
            key,
            node: node.nodeId,
            invoke_ms,
            complete_ms: now(),
            status: 200,
            result: { lock_id: answer.body.lock_id, fence_token: answer.body.fence_token, is_locked: answer.body.is_locked, owner_id: answer.body.owner_id },
          });
          break;
        }
        if (now() > deadline) {
          unread.push(key);
          break;
        }
        await sleep(200);
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 8 }, () => worker()));
  return unread;
}
