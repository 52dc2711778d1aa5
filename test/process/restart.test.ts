import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllServerProcesses, startServerProcess, type ServerProcess, callServer } from '../helpers/process.js';

/**
 * The whole node as a child process (`node dist/http/server.js`): SIGKILL in
 * the middle of a workload loses no acknowledged user or lock; SIGTERM lets
 * in-flight requests finish and exits 0.
 */
const dirs: string[] = [];
afterAll(async () => {
  await killAllServerProcesses();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'platform-process-'));
  dirs.push(dir);
  return dir;
}

const call = callServer;

interface AckedUser {
  email: string;
  username: string;
  password: string;
  user_id: string;
  token: string;
}

/** What the client was told about one key of one tenant. */
interface KeyRecord {
  user: AckedUser;
  path: string;
  owner_id: string;
  /** The last acknowledged state: held (lock_id, fence) or released (lock_id null). */
  lock_id: string | null;
  fence_token: number;
  /** An operation on the key was sent and never acknowledged (cut off by the kill). */
  pending: boolean;
}

const PASSWORD = 'correct horse battery';
const lockPath = (key: string) => `/api/v1/distributed-state/restart/${key}/lock`;

describe('process restart', () => {
  it('SIGKILL mid-workload: every acknowledged user and lock survives; fence tokens keep increasing', async () => {
    const dataDir = tempDir();
    const first = await startServerProcess({ dataDir });

    const users: AckedUser[] = [];
    const keys: KeyRecord[] = [];
    const unexpected: string[] = [];
    let ackedLockOps = 0;
    let cutOff = 0;
    let killed = false;
    let killedAt: Promise<unknown> | undefined;
    const KILL_AFTER_LOCK_OPS = 300;
    const WORKERS = 12;

    async function register(worker: number, n: number): Promise<AckedUser | null> {
      const username = `w${worker}_${n}_${process.pid}`;
      const email = `${username}@example.com`;
      const res = await call(first, 'POST', '/api/v1/auth/register', { body: { email, username, password: PASSWORD } });
      if (res.status !== 201) {
        unexpected.push(`register ${res.status} ${JSON.stringify(res.body)}`);
        return null;
      }
      const user = { email, username, password: PASSWORD, user_id: res.body.user.id, token: res.body.access_token };
      users.push(user);
      return user;
    }

    async function acquire(record: KeyRecord): Promise<boolean> {
      record.pending = true;
      const res = await call(first, 'POST', record.path, { token: record.user.token, body: { owner_id: record.owner_id, ttl_seconds: 3600, metadata: { path: record.path } } });
      if (res.status !== 200) {
        unexpected.push(`acquire ${res.status} ${JSON.stringify(res.body)}`);
        return false;
      }
      record.lock_id = res.body.lock_id;
      record.fence_token = res.body.fence_token;
      record.pending = false;
      ackedLockOps++;
      return true;
    }

    async function release(record: KeyRecord): Promise<boolean> {
      record.pending = true;
      const res = await call(first, 'DELETE', record.path, { token: record.user.token, body: { lock_id: record.lock_id, owner_id: record.owner_id } });
      if (res.status !== 204) {
        unexpected.push(`release ${res.status} ${JSON.stringify(res.body)}`);
        return false;
      }
      record.lock_id = null;
      record.pending = false;
      ackedLockOps++;
      return true;
    }

    async function worker(w: number): Promise<void> {
      try {
        const user = await register(w, 0);
        if (!user) return;
        for (let i = 0; !killed && i < 10_000; i++) {
          if (i % 8 === 7 && !(await register(w, i))) return;
          // Every worker (a tenant of its own) uses the same key names: tenancy keeps them apart.
          const record: KeyRecord = { user, path: lockPath(`key-${i}`), owner_id: `owner-${w}`, lock_id: null, fence_token: 0, pending: false };
          keys.push(record);
          if (!(await acquire(record))) return;
          if (i % 3 === 0) {
            // A release/re-acquire cycle, so fence tokens above 1 must survive too.
            if (!(await release(record))) return;
            if (!(await acquire(record))) return;
          } else if (i % 3 === 1) {
            if (!(await release(record))) return;
          }
          if (ackedLockOps >= KILL_AFTER_LOCK_OPS && !killed) {
            killed = true;
            killedAt = first.stop('SIGKILL');
          }
        }
      } catch {
        // The connection died with the process: the operation in flight stays `pending`.
        if (!killed) unexpected.push('request failed before the kill');
        cutOff++;
      }
    }

    await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
    expect(killed, 'the workload ended before the kill').toBe(true);
    const exit = await killedAt;
    expect(exit).toEqual({ code: null, signal: 'SIGKILL' });
    expect(unexpected, first.output()).toEqual([]);
    expect(users.length).toBeGreaterThanOrEqual(WORKERS);
    expect(ackedLockOps).toBeGreaterThanOrEqual(KILL_AFTER_LOCK_OPS);
    // The kill really was mid-workload: requests were in flight and never answered.
    expect(cutOff).toBeGreaterThan(0);

    const second = await startServerProcess({ dataDir });
    try {
      // Every acknowledged user logs in, and its e-mail is still taken.
      await Promise.all(
        users.map(async (user) => {
          const login = await call(second, 'POST', '/api/v1/auth/login', { body: { login: user.username, password: user.password } });
          expect(login.status, `login ${user.username}`).toBe(200);
          expect(login.body.user.id).toBe(user.user_id);
          user.token = login.body.access_token;
        }),
      );
      const again = await call(second, 'POST', '/api/v1/auth/register', { body: { email: users[0].email, username: 'another_name', password: PASSWORD } });
      expect(again.status).toBe(409);

      // Every acknowledged lock state reads back exactly; then fence tokens continue upwards.
      const byUser = new Map<AckedUser, KeyRecord[]>();
      for (const record of keys) byUser.set(record.user, [...(byUser.get(record.user) ?? []), record]);
      let checkedExact = 0;
      await Promise.all(
        [...byUser.values()].map(async (records) => {
          for (const record of records) {
            const read = await call(second, 'GET', record.path, { token: record.user.token });
            expect(read.status).toBe(200);
            const label = `${record.user.username} ${record.path} ${JSON.stringify(record)} -> ${JSON.stringify(read.body)}`;
            if (!record.pending) {
              checkedExact++;
              if (record.lock_id) {
                expect(read.body, label).toMatchObject({ is_locked: true, lock_id: record.lock_id, owner_id: record.owner_id, fence_token: record.fence_token, metadata: { path: record.path } });
              } else {
                expect(read.body, label).toMatchObject({ is_locked: false, lock_id: null, fence_token: record.fence_token });
              }
            } else {
              // The operation in flight may or may not have committed; nothing acknowledged went backwards.
              expect(read.body.fence_token, label).toBeGreaterThanOrEqual(record.fence_token);
            }
            const seen = read.body.fence_token as number;
            if (read.body.is_locked) {
              const released = await call(second, 'DELETE', record.path, { token: record.user.token, body: { lock_id: read.body.lock_id, owner_id: read.body.owner_id } });
              expect(released.status).toBe(204);
            }
            const next = await call(second, 'POST', record.path, { token: record.user.token, body: { owner_id: 'after-restart' } });
            expect(next.status).toBe(200);
            expect(next.body.fence_token, label).toBe(seen + 1);
          }
        }),
      );
      expect(checkedExact).toBeGreaterThan(KILL_AFTER_LOCK_OPS / 3);
    } finally {
      const stopped = await second.stop('SIGTERM');
      expect(stopped, second.output()).toEqual({ code: 0, signal: null });
    }
  });

  it('a data directory keeps the partition count it was created with; another PARTITIONS stops the start', async () => {
    const dataDir = tempDir();
    const first = await startServerProcess({ dataDir, env: { LOG_LEVEL: 'info' } });
    const startLine = () => first.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line)).find((line) => line.msg === 'node started');
    expect(startLine()).toMatchObject({ partitions: 1 });
    const user = await call(first, 'POST', '/api/v1/auth/register', { body: { email: 'parts@example.com', username: 'parts_user', password: PASSWORD } });
    expect(user.status).toBe(201);
    const acquired = await call(first, 'POST', lockPath('parts'), { token: user.body.access_token, body: { owner_id: 'o', ttl_seconds: 3600 } });
    expect(acquired.status).toBe(200);
    expect(await first.stop('SIGTERM')).toEqual({ code: 0, signal: null });

    await expect(startServerProcess({ dataDir, env: { PARTITIONS: '8' } })).rejects.toThrow(/PARTITIONS is 8, but this data directory is laid out in 1 partitions/);

    const again = await startServerProcess({ dataDir });
    const login = await call(again, 'POST', '/api/v1/auth/login', { body: { login: 'parts_user', password: PASSWORD } });
    const read = await call(again, 'GET', lockPath('parts'), { token: login.body.access_token });
    expect(read.body).toMatchObject({ is_locked: true, lock_id: acquired.body.lock_id, fence_token: 1 });
    expect(await again.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  });

  it('SIGTERM while requests are in flight: they complete with 2xx, the process exits 0, the data is there after restart', async () => {
    const dataDir = tempDir();
    // The production KDF cost makes each registration slow enough to still be running at SIGTERM.
    const server = await startServerProcess({ dataDir, env: { PASSWORD_KDF_COST: '15', LOG_LEVEL: 'debug' } });
    const setup = await call(server, 'POST', '/api/v1/auth/register', {
      body: { email: 'term@example.com', username: 'term_user', password: PASSWORD },
      headers: { 'x-request-id': 'trace-term-1' },
    });
    expect(setup.status).toBe(201);

    const REGISTRATIONS = 12;
    const started = Date.now();
    const completions: { status: number; at_ms: number; username: string }[] = [];
    let firstDone!: () => void;
    const firstCompletion = new Promise<void>((resolve) => (firstDone = resolve));
    const inFlight = Array.from({ length: REGISTRATIONS }, async (_, i) => {
      const username = `term_${i}`;
      try {
        const res = await call(server, 'POST', '/api/v1/auth/register', { body: { email: `${username}@example.com`, username, password: PASSWORD } });
        completions.push({ status: res.status, at_ms: Date.now(), username });
      } catch (error) {
        completions.push({ status: -1, at_ms: Date.now(), username: `${username}: ${String((error as Error).cause ?? error)}` });
      }
      firstDone();
    });
    const locks = Array.from({ length: 10 }, (_, i) =>
      call(server, 'POST', lockPath(`term-${i}`), { token: setup.body.access_token, body: { owner_id: 'o', ttl_seconds: 3600 } }),
    );
    // Each registration needs about 100 ms of scrypt, four at a time on the thread pool. When the
    // first one is answered, every request has long reached the server and most registrations are
    // still running: stop the server now.
    await firstCompletion;
    const sigtermAt = Date.now();
    const exitPromise = server.stop('SIGTERM');
    await Promise.all(inFlight);
    const lockReplies = await Promise.all(locks);
    const exit = await Promise.race([
      exitPromise,
      new Promise<string>((resolve) => setTimeout(() => resolve('still running 10 s after SIGTERM'), 10_000)),
    ]);

    expect(exit, server.output()).toEqual({ code: 0, signal: null });
    // pino logs carry the request id: the client's x-request-id, or a generated one.
    const logLines = server.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
    expect(logLines.find((line) => line.request_id === 'trace-term-1')).toMatchObject({ url: '/api/v1/auth/register', status: 201 });
    expect(logLines.filter((line) => /^req_[A-Za-z0-9_-]+$/.test(line.request_id ?? '') && line.url === '/api/v1/auth/register')).toHaveLength(REGISTRATIONS);
    expect(logLines.map((line) => line.msg)).toEqual(expect.arrayContaining(['stopping: finishing in-flight requests and turns', 'stopped']));
    expect(completions.map((c) => c.status), JSON.stringify(completions)).toEqual(Array(REGISTRATIONS).fill(201));
    for (const reply of lockReplies) expect(reply.status).toBe(200);
    // The test only means something if some requests really were running at SIGTERM.
    expect(completions.filter((c) => c.at_ms > sigtermAt).length, `all done ${Math.max(...completions.map((c) => c.at_ms)) - started} ms after start`).toBeGreaterThan(0);

    const restarted = await startServerProcess({ dataDir });
    try {
      const logins = await Promise.all(completions.map(({ username }) => call(restarted, 'POST', '/api/v1/auth/login', { body: { login: username, password: PASSWORD } })));
      expect(logins.map((login) => login.status)).toEqual(Array(REGISTRATIONS).fill(200));
      const login = await call(restarted, 'POST', '/api/v1/auth/login', { body: { login: 'term_user', password: PASSWORD } });
      for (let i = 0; i < lockReplies.length; i++) {
        const read = await call(restarted, 'GET', lockPath(`term-${i}`), { token: login.body.access_token });
        expect(read.body).toMatchObject({ is_locked: true, lock_id: lockReplies[i].body.lock_id, fence_token: 1 });
      }
    } finally {
      expect(await restarted.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    }
  });
});
