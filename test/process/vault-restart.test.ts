import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllServerProcesses, startServerProcess, callServer as call, untilReal as until } from '../helpers/process.js';

/**
 * A time lock opens at unlock_at with no request, even when its node was
 * killed (SIGKILL) before that time and restarted after it: the alarm is
 * durable (docs/api/vault.md, "Lock types and combinations").
 */
const dirs: string[] = [];
afterAll(async () => {
  await killAllServerProcesses();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('vault time lock across a SIGKILL', () => {
  it('unlocks by its alarm after the restart, without any request to the attestation', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'platform-vault-'));
    dirs.push(dataDir);
    let server = await startServerProcess({ dataDir });
    const registered = await call(server, 'POST', '/api/v1/auth/register', { body: { email: 'vault@example.com', username: 'vault', password: 'correct horse battery' } });
    expect(registered.status).toBe(201);
    const token = registered.body.access_token as string;
    const unlock_at = new Date(Date.now() + 2_000).toISOString();
    const created = await call(server, 'POST', '/api/v1/vault/attestations', { token, body: { content: { data: 'after the crash', type: 'text/plain' }, lock_config: { type: 'time_lock', unlock_at } } });
    expect(created.status).toBe(201);
    const id = created.body.attestation_id as string;
    expect((await call(server, 'POST', `/api/v1/vault/attestations/${id}/unlock`, { token })).status).toBe(409);

    expect((await server.stop('SIGKILL')).signal).toBe('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, Date.parse(unlock_at) - Date.now()) + 200));
    server = await startServerProcess({ dataDir, port: server.port });

    // Only the list is read: it learns the status from the attestation's alarm turn.
    const listed = await until(async () => {
      const res = await call(server, 'GET', '/api/v1/vault/attestations?status=unlocked', { token });
      return res.body.attestations.find((a: { attestation_id: string }) => a.attestation_id === id);
    }, 'the alarm to unlock after the restart');
    expect(listed.status).toBe('unlocked');
    const history = await call(server, 'GET', `/api/v1/vault/attestations/${id}/history`, { token });
    expect(history.body.events.map((e: { event_type: string; actor: string }) => `${e.event_type}:${e.actor}`)).toEqual([`created:${registered.body.user.id}`, 'time_reached:system', 'unlocked:system']);
    // The seal key lives in DATA_DIR for an embedded node: the content is still revealable after the restart.
    const open = await call(server, 'POST', `/api/v1/vault/attestations/${id}/unlock`, { token });
    expect(open.status).toBe(200);
    expect(open.body.revealed.data).toBe('after the crash');
    await server.stop('SIGTERM');
  }, 60_000);
});
