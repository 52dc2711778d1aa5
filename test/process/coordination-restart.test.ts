import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllServerProcesses, startServerProcess, type ServerProcess, callServer } from '../helpers/process.js';

/**
 * Coordination state across a SIGKILL of the whole node (issue 5): presence
 * sessions, a waiting room's line, and the room's admission alarm, which must
 * fire after the restart with no request to wake it. A child process runs on
 * the system clock, so the alarm part waits (bounded) for real time to pass.
 */
const dirs: string[] = [];
afterAll(async () => {
  await killAllServerProcesses();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const call = (server: ServerProcess, method: string, path: string, token?: string, body?: unknown) => callServer(server, method, path, { token, body });

async function until<T>(check: () => Promise<T | undefined>, timeout_ms: number): Promise<T> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('coordination survives SIGKILL', () => {
  it('keeps presence sessions and the waiting line, and the admission alarm fires after restart', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'platform-coordination-'));
    dirs.push(dataDir);
    let server = await startServerProcess({ dataDir });
    const registered = await call(server, 'POST', '/api/v1/auth/register', undefined, {
      email: 'coord@example.com',
      username: 'coord',
      password: 'correct horse battery',
    });
    expect(registered.status).toBe(201);
    const token: string = registered.body.access_token;

    // Presence: two live sessions in one context.
    expect((await call(server, 'POST', '/api/v1/presence/contexts', token, { id: 'lobby', kind: 'room', heartbeat: { ttl_seconds: 3600, idle_after_seconds: 600, stale_after_seconds: 1200 } })).status).toBeLessThan(300);
    const sessions: string[] = [];
    for (const id of ['alice', 'bob']) {
      const beat = await call(server, 'POST', '/api/v1/presence/lobby/heartbeat', token, { subject: { id, kind: 'user' } });
      expect(beat.status).toBe(200);
      sessions.push(beat.body.session_id);
    }

    // Waiting room: automatic admission of one member every 2 s, far enough
    // out that the kill lands before the first tick.
    const room = await call(server, 'POST', '/api/v1/waiting-rooms', token, {
      room_id: 'launch',
      capacity: 10,
      admission_rate: { batch_size: 1, interval_seconds: 2 },
    });
    expect(room.status).toBeLessThan(300);
    for (const member_id of ['m1', 'm2', 'm3']) {
      expect((await call(server, 'POST', '/api/v1/waiting-rooms/launch/join', token, { member_id })).status).toBe(200);
    }

    expect((await server.stop('SIGKILL')).signal).toBe('SIGKILL');
    server = await startServerProcess({ dataDir });

    const listed = await call(server, 'GET', '/api/v1/presence/lobby/list', token);
    expect(listed.status).toBe(200);
    expect(listed.body.sessions.map((s: { session_id: string }) => s.session_id).sort()).toEqual([...sessions].sort());

    // The line kept its order (whatever the first tick already admitted).
    const members = await call(server, 'GET', '/api/v1/waiting-rooms/launch/members?status=waiting', token);
    expect(members.status).toBe(200);
    const waiting = members.body.members.map((m: { member_id: string }) => m.member_id);
    expect(['m1', 'm2', 'm3'].slice(3 - waiting.length)).toEqual(waiting);
    expect(members.body.members.map((m: { position: number }) => m.position)).toEqual(waiting.map((_: string, i: number) => i + 1));

    // The re-armed admission alarm keeps admitting, one member per tick.
    const admitted = await until(async () => {
      const active = await call(server, 'GET', '/api/v1/waiting-rooms/launch/members?status=active', token);
      return active.body.members.length >= 2 ? active.body.members.length : undefined;
    }, 10_000);
    expect(admitted).toBeGreaterThanOrEqual(2);
    await server.stop('SIGTERM');
  }, 45_000);
});
