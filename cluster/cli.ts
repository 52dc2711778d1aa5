import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Etcd3 } from 'etcd3';
import { clusterKeys, type ClusterConfigRecord, type ClusterKeys, type IsrRecord, type LeaderRecord, type MemberRecord, type NodeStatus } from './etcd-keys.js';
import { requestDrain } from './drain-request.js';
import { replicaSet } from './placement.js';
import { estimateProgress, formatProgress, RATE_WINDOW_MS, shouldPrintLine, type ProgressSample } from './progress.js';

/**
 * The operator CLI: `npm run cluster -- <command>`. Reads (and for drain and
 * rebalance, writes one request key in) etcd directly, so it works whatever
 * state the nodes are in. Exit codes: 0 ok, 1 failure or timeout, 2 usage.
 */

const USAGE = `Usage: npm run cluster -- <command> [options]

Commands:
  status [--partitions] [--json]   members, partitions led/followed per node, replication lag,
                                   partitions without a leader (exit 1 if there are any)
  drain <node> [--timeout 60]      ask <node> to hand every partition over (it stays up, empty);
                                   waits until it leads none
  rebalance [--timeout 60]         ask every leader to move partitions to their preferred node;
                                   waits until every partition is led by it
  drain and rebalance show their progress on stderr while they wait (partitions moved out
  of the total, time left): redrawn in place on a terminal, as lines otherwise

Environment:
  ETCD_ENDPOINTS   comma-separated etcd client URLs (required), e.g. http://127.0.0.1:2379
  CLUSTER_PREFIX   etcd key prefix of the cluster (default /platform/)

Exit codes: 0 ok, 1 failure or timeout, 2 usage.`;

export interface CliIo {
  out(line: string): void;
  err(line: string): void;
  /** Progress of a drain or rebalance (`done` of its total so far); `final` once it ends. Optional: tests may leave it out. */
  progress?(line: string, done: number, final: boolean): void;
}

/** Off a terminal, a progress line at least this often while the count stands still. */
const PROGRESS_LINE_PERIOD_MS = 10_000;

/**
 * stdout keeps the command's results; progress goes to stderr: redrawn in place on a terminal
 * (cleared before any stdout line, so the two never share a line), as periodic lines otherwise.
 */
function consoleIoFor(stderr: NodeJS.WriteStream): CliIo {
  let drawn = false;
  let previous: { done: number; at_ms: number } | null = null;
  const clear = () => {
    if (drawn) stderr.write('\r\x1b[K');
    drawn = false;
  };
  return {
    out: (line) => {
      clear();
      process.stdout.write(`${line}\n`);
    },
    err: (line) => {
      clear();
      stderr.write(`${line}\n`);
    },
    progress: (line, done, final) => {
      if (stderr.isTTY) {
        stderr.write(`\r${line}\x1b[K${final ? '\n' : ''}`);
        drawn = !final;
        return;
      }
      const now = Date.now();
      if (!final && !shouldPrintLine(previous, done, now, PROGRESS_LINE_PERIOD_MS)) return;
      stderr.write(`${line}\n`);
      previous = { done, at_ms: now };
    },
  };
}

const consoleIo: CliIo = consoleIoFor(process.stderr);

/** Samples the count done at each poll and reports the progress line with its ETA. */
function progressReporter(io: CliIo, label: string) {
  const samples: ProgressSample[] = [];
  return (done: number, total: number, final = false) => {
    const now = Date.now();
    samples.push({ at_ms: now, done });
    // The estimate reads only the last RATE_WINDOW_MS and the first sample.
    while (samples.length > 2 && samples[1]!.at_ms < now - RATE_WINDOW_MS) samples.splice(1, 1);
    io.progress?.(formatProgress(label, estimateProgress(samples, total)), done, final);
  };
}

class UsageError extends Error {}

interface ParsedArgs {
  command: string | undefined;
  positional: string[];
  json: boolean;
  partitions: boolean;
  timeout_s: number;
  help: boolean;
}

function parseArgs(argv: string[]): ParsedArgs {
  const parsed: ParsedArgs = { command: undefined, positional: [], json: false, partitions: false, timeout_s: 60, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--json') parsed.json = true;
    else if (arg === '--partitions') parsed.partitions = true;
    else if (arg === '--help' || arg === '-h') parsed.help = true;
    else if (arg === '--timeout' || arg.startsWith('--timeout=')) {
      const raw = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : argv[++i];
      const value = Number(raw);
      if (raw === undefined || !Number.isFinite(value) || value <= 0) throw new UsageError(`--timeout needs a positive number of seconds, got ${raw ?? 'nothing'}`);
      parsed.timeout_s = value;
    } else if (arg.startsWith('-')) throw new UsageError(`unknown option ${arg}`);
    else if (parsed.command === undefined) parsed.command = arg;
    else parsed.positional.push(arg);
  }
  return parsed;
}

/** Everything the CLI reads from etcd, in one snapshot. */
export interface ClusterSnapshot {
  config: ClusterConfigRecord | undefined;
  members: MemberRecord[];
  /** partition -> leader and epoch (create revision of its key). */
  leaders: Map<number, LeaderRecord & { epoch: number }>;
  isr: Map<number, IsrRecord>;
  statuses: Map<string, NodeStatus>;
  drains: Map<string, { requested_at?: string }>;
  rebalance: { requested_at?: string } | undefined;
}

function parseJson<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

export async function readSnapshot(client: Etcd3, keys: ClusterKeys): Promise<ClusterSnapshot> {
  const response = await client.getAll().prefix(keys.base).exec();
  const snapshot: ClusterSnapshot = {
    config: undefined,
    members: [],
    leaders: new Map(),
    isr: new Map(),
    statuses: new Map(),
    drains: new Map(),
    rebalance: undefined,
  };
  for (const kv of response.kvs) {
    const key = kv.key.toString('utf8');
    const value = kv.value.toString('utf8');
    if (key === keys.config) snapshot.config = parseJson<ClusterConfigRecord>(value);
    else if (key === keys.rebalance) snapshot.rebalance = parseJson(value) ?? {};
    else if (key.startsWith(keys.membersPrefix)) {
      const member = parseJson<MemberRecord>(value);
      if (member) snapshot.members.push(member);
    } else if (key.startsWith(keys.statusPrefix)) {
      const status = parseJson<NodeStatus>(value);
      if (status) snapshot.statuses.set(status.node_id ?? key.slice(keys.statusPrefix.length), status);
    } else if (key.startsWith(keys.drainPrefix)) {
      snapshot.drains.set(key.slice(keys.drainPrefix.length), parseJson(value) ?? {});
    } else if (key.startsWith(keys.partitionsPrefix)) {
      const [p, what] = key.slice(keys.partitionsPrefix.length).split('/');
      const partition = Number(p);
      if (!Number.isInteger(partition)) continue;
      if (what === 'leader') {
        const leader = parseJson<LeaderRecord>(value);
        if (leader) snapshot.leaders.set(partition, { ...leader, epoch: Number(kv.create_revision) });
      } else if (what === 'isr') {
        const isr = parseJson<IsrRecord>(value);
        if (isr) snapshot.isr.set(partition, isr);
      }
    }
  }
  snapshot.members.sort((a, b) => (a.node_id < b.node_id ? -1 : a.node_id > b.node_id ? 1 : 0));
  return snapshot;
}

export interface StatusReport {
  partitions: number;
  replication_factor: number;
  members: {
    node_id: string;
    http_url: string;
    grpc_address: string;
    draining: boolean;
    drain_requested: boolean;
    started_at: string;
    leads: number;
    follows: number;
    /** Over the partitions it leads: the largest and the total number of entries its followers have not acknowledged. */
    lag_max: number | null;
    lag_sum: number | null;
    status_at: string | null;
  }[];
  partition_table: { partition: number; leader: string | null; epoch: number | null; isr: string[]; preferred: string | null }[];
  leaderless: number[];
  /** Leaders that are not (or no longer) members: their lease has not expired yet, or their record is stale. */
  leaders_not_members: number[];
  rebalance_requested_at: string | null;
}

function preferredLeaders(snapshot: ClusterSnapshot, partitions: number, rf: number): (string | null)[] {
  const candidates = snapshot.members.filter((m) => !m.draining).map((m) => m.node_id);
  return Array.from({ length: partitions }, (_, p) => (candidates.length > 0 ? replicaSet(p, candidates, rf)[0] : null));
}

export function statusReport(snapshot: ClusterSnapshot): StatusReport {
  const partitions = snapshot.config?.partitions ?? 0;
  const rf = snapshot.config?.replication_factor ?? 2;
  const preferred = preferredLeaders(snapshot, partitions, rf);
  const memberIds = new Set(snapshot.members.map((m) => m.node_id));
  const table = Array.from({ length: partitions }, (_, p) => {
    const leader = snapshot.leaders.get(p);
    return {
      partition: p,
      leader: leader?.node_id ?? null,
      epoch: leader?.epoch ?? null,
      isr: snapshot.isr.get(p)?.replicas ?? [],
      preferred: preferred[p],
    };
  });
  const members = snapshot.members.map((m) => {
    const status = snapshot.statuses.get(m.node_id);
    const lags = status ? Object.values(status.lag ?? {}).flatMap((perFollower) => Object.values(perFollower ?? {})) : [];
    return {
      node_id: m.node_id,
      http_url: m.http_url,
      grpc_address: m.grpc_address,
      draining: m.draining,
      drain_requested: snapshot.drains.has(m.node_id),
      started_at: m.started_at,
      leads: table.filter((row) => row.leader === m.node_id).length,
      follows: table.filter((row) => row.leader !== null && row.leader !== m.node_id && row.isr.includes(m.node_id)).length,
      lag_max: status ? lags.reduce((a, b) => Math.max(a, b), 0) : null,
      lag_sum: status ? lags.reduce((a, b) => a + b, 0) : null,
      status_at: status?.at ?? null,
    };
  });
  return {
    partitions,
    replication_factor: rf,
    members,
    partition_table: table,
    leaderless: table.filter((row) => row.leader === null).map((row) => row.partition),
    leaders_not_members: table.filter((row) => row.leader !== null && !memberIds.has(row.leader)).map((row) => row.partition),
    rebalance_requested_at: snapshot.rebalance?.requested_at ?? null,
  };
}

/** Left-aligned text table. */
export function formatTable(header: string[], rows: (string | number)[][]): string[] {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd());
}

/** Compact list of partition numbers: 0-3,7,9-10. */
export function ranges(numbers: number[]): string {
  const sorted = [...numbers].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    parts.push(j > i ? `${sorted[i]}-${sorted[j]}` : String(sorted[i]));
    i = j;
  }
  return parts.join(',');
}

export function formatStatus(report: StatusReport, withPartitions: boolean): string[] {
  const lines: string[] = [];
  lines.push(`cluster: ${report.members.length} member(s), ${report.partitions} partitions, replication factor ${report.replication_factor}`);
  lines.push('');
  if (report.members.length === 0) lines.push('no live member');
  else {
    lines.push(
      ...formatTable(
        ['NODE', 'HTTP', 'GRPC', 'STATE', 'LEADS', 'FOLLOWS', 'LAG MAX', 'LAG SUM'],
        report.members.map((m) => [
          m.node_id,
          m.http_url,
          m.grpc_address,
          m.draining ? 'draining' : m.drain_requested ? 'drain requested' : 'serving',
          m.leads,
          m.follows,
          m.lag_max ?? '-',
          m.lag_sum ?? '-',
        ]),
      ),
    );
  }
  if (withPartitions) {
    lines.push('');
    lines.push(
      ...formatTable(
        ['PARTITION', 'LEADER', 'EPOCH', 'ISR', 'PREFERRED'],
        report.partition_table.map((row) => [
          row.partition,
          row.leader ?? 'NONE (!)',
          row.epoch ?? '-',
          row.isr.join(',') || '-',
          row.preferred === row.leader ? row.preferred ?? '-' : `${row.preferred ?? '-'} (*)`,
        ]),
      ),
    );
    lines.push('(*) not led by its preferred node');
  }
  lines.push('');
  if (report.leaderless.length > 0) lines.push(`WARNING: ${report.leaderless.length} partition(s) without a leader: ${ranges(report.leaderless)}`);
  else lines.push('every partition has a leader');
  if (report.leaders_not_members.length > 0) {
    lines.push(`WARNING: ${report.leaders_not_members.length} partition(s) led by a node that is not a member: ${ranges(report.leaders_not_members)}`);
  }
  const misplaced = report.partition_table.filter((row) => row.leader !== null && row.leader !== row.preferred).length;
  if (misplaced > 0) lines.push(`${misplaced} partition(s) not on their preferred node (\`npm run cluster -- rebalance\` moves them)`);
  return lines;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Context {
  client: Etcd3;
  keys: ClusterKeys;
  io: CliIo;
  args: ParsedArgs;
  /** Poll interval of drain and rebalance (tests shorten it). */
  poll_ms: number;
}

async function status(ctx: Context): Promise<number> {
  const snapshot = await readSnapshot(ctx.client, ctx.keys);
  if (!snapshot.config) {
    ctx.io.err(`no cluster under ${ctx.keys.base} in etcd (no ${ctx.keys.config} key): has a node started with these ETCD_ENDPOINTS and CLUSTER_PREFIX?`);
    return 1;
  }
  const report = statusReport(snapshot);
  if (ctx.args.json) ctx.io.out(JSON.stringify(report, null, 2));
  else for (const line of formatStatus(report, ctx.args.partitions)) ctx.io.out(line);
  return report.leaderless.length > 0 ? 1 : 0;
}

async function drain(ctx: Context): Promise<number> {
  const node = ctx.args.positional[0];
  if (!node || ctx.args.positional.length > 1) throw new UsageError('drain takes exactly one node id');
  const before = await readSnapshot(ctx.client, ctx.keys);
  if (!before.config) {
    ctx.io.err(`no cluster under ${ctx.keys.base} in etcd`);
    return 1;
  }
  const outcome = await requestDrain(async (key, value) => ctx.client.put(key).value(value), ctx.keys, before.members, node, new Date());
  if (!outcome.ok) {
    ctx.io.err(
      outcome.reason === 'not_member'
        ? `${node} is not a member of the cluster (members: ${before.members.map((m) => m.node_id).join(', ') || 'none'})`
        : `${node} is the only serving member: no other node could take its partitions over`,
    );
    return 1;
  }
  ctx.io.out(`drain of ${node} requested`);
  // Progress: of the partitions the node led when asked, those now led by another node.
  const handing = [...before.leaders.entries()].filter(([, leader]) => leader.node_id === node).map(([partition]) => partition);
  const progress = progressReporter(ctx.io, `drain ${node}`);
  const deadline = Date.now() + ctx.args.timeout_s * 1000;
  let lastLine = '';
  for (;;) {
    const snapshot = await readSnapshot(ctx.client, ctx.keys);
    const led = [...snapshot.leaders.values()].filter((l) => l.node_id === node).length;
    const member = snapshot.members.find((m) => m.node_id === node);
    // Done when the node leads nothing and every partition it handed over has its new leader.
    const leaderless = led === 0 ? statusReport(snapshot).leaderless : [];
    const moved = handing.filter((partition) => {
      const leader = snapshot.leaders.get(partition);
      return leader !== undefined && leader.node_id !== node;
    }).length;
    const finished = led === 0 && leaderless.length === 0;
    if (handing.length > 0) progress(moved, handing.length, finished || Date.now() > deadline);
    if (finished) {
      if (!member) ctx.io.out(`${node} left the cluster; it leads no partition`);
      else ctx.io.out(`${node} leads no partition: drained (it stays up; stop it or restart it to serve again)`);
      return 0;
    }
    const line =
      led > 0
        ? `${node} leads ${led} partition${led === 1 ? '' : 's'}...`
        : `${node} leads no partition; ${leaderless.length} partition(s) waiting for a new leader: ${ranges(leaderless)}...`;
    if (line !== lastLine) ctx.io.out(line);
    lastLine = line;
    if (Date.now() > deadline) {
      ctx.io.err(
        led > 0
          ? `timeout after ${ctx.args.timeout_s} s: ${node} still leads ${led} partition(s) (the drain request stays in place)`
          : `timeout after ${ctx.args.timeout_s} s: ${node} leads no partition, but partitions ${ranges(leaderless)} have no leader`,
      );
      return 1;
    }
    await sleep(ctx.poll_ms);
  }
}

async function rebalance(ctx: Context): Promise<number> {
  if (ctx.args.positional.length > 0) throw new UsageError('rebalance takes no argument');
  const before = await readSnapshot(ctx.client, ctx.keys);
  if (!before.config) {
    ctx.io.err(`no cluster under ${ctx.keys.base} in etcd`);
    return 1;
  }
  await ctx.client.put(ctx.keys.rebalance).value(JSON.stringify({ requested_at: new Date().toISOString() }));
  ctx.io.out('rebalance requested');
  // Progress: of every partition seen off its preferred node since the request, those now on it.
  const moving = new Set<number>();
  const progress = progressReporter(ctx.io, 'rebalance');
  const deadline = Date.now() + ctx.args.timeout_s * 1000;
  let lastLine = '';
  for (;;) {
    const report = statusReport(await readSnapshot(ctx.client, ctx.keys));
    const misplaced = report.partition_table.filter((row) => row.leader === null || row.leader !== row.preferred);
    for (const row of misplaced) moving.add(row.partition);
    if (moving.size > 0) progress(moving.size - misplaced.length, moving.size, misplaced.length === 0 || Date.now() > deadline);
    if (misplaced.length === 0) {
      ctx.io.out(`every partition is led by its preferred node (${report.members.map((m) => `${m.node_id}: ${m.leads}`).join(', ')})`);
      return 0;
    }
    const leaderless = misplaced.filter((row) => row.leader === null).length;
    const line = `${misplaced.length} of ${report.partitions} partitions not on their preferred node${leaderless > 0 ? ` (${leaderless} without a leader)` : ''}...`;
    if (line !== lastLine) ctx.io.out(line);
    lastLine = line;
    if (Date.now() > deadline) {
      ctx.io.err(`timeout after ${ctx.args.timeout_s} s: partitions ${ranges(misplaced.map((r) => r.partition))} are not on their preferred node`);
      return 1;
    }
    await sleep(ctx.poll_ms);
  }
}

/** Runs one CLI invocation; resolves with the exit code. */
export async function runCli(argv: string[], env: NodeJS.ProcessEnv = process.env, io: CliIo = consoleIo, options: { poll_ms?: number } = {}): Promise<number> {
  let args: ParsedArgs;
  try {
    args = parseArgs(argv);
  } catch (error) {
    io.err(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (args.help) {
    io.out(USAGE);
    return 0;
  }
  const commands: Record<string, (ctx: Context) => Promise<number>> = { status, drain, rebalance };
  if (args.command === undefined || !(args.command in commands)) {
    io.err(`${args.command === undefined ? 'no command' : `unknown command ${args.command}`}\n\n${USAGE}`);
    return 2;
  }
  const endpoints = (env.ETCD_ENDPOINTS ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')
    .map((e) => (/^https?:\/\//.test(e) ? e : `http://${e}`));
  if (endpoints.length === 0) {
    io.err(`ETCD_ENDPOINTS is not set\n\n${USAGE}`);
    return 2;
  }
  const client = new Etcd3({
    hosts: endpoints,
    dialTimeout: 5_000,
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + 5_000 }),
  });
  try {
    return await commands[args.command]({ client, keys: clusterKeys(env.CLUSTER_PREFIX || '/platform/'), io, args, poll_ms: options.poll_ms ?? 500 });
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`${error.message}\n\n${USAGE}`);
      return 2;
    }
    io.err(`failed: ${(error as Error).message ?? String(error)} (etcd at ${endpoints.join(',')})`);
    return 1;
  } finally {
    client.close();
  }
}

function isMain(): boolean {
  if (!process.argv[1]) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
  } catch {
    return false;
  }
}

if (isMain()) {
  runCli(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
