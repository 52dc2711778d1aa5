import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllServerProcesses, startServerProcess, callServer as call, untilReal as until } from '../helpers/process.js';

/**
 * A submission's hooks run exactly once across a crash: submissions whose
 * replies came back just before a SIGKILL still run their fsm hook after the
 * restart (nothing lost), and no hook moves its machine twice (nothing
 * doubled). Each of N forms targets its own state of one machine whose states
 * all lead to each other, so every hook applied is exactly one move: the
 * machine must show N moves, one per submission (docs/api/forms.md, "Execution hooks").
 */
const dirs: string[] = [];
afterAll(async () => {
  await killAllServerProcesses();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('form hooks across a SIGKILL', () => {
  it('runs each submission\'s hook exactly once', async () => {
    const N = 12;
    const dataDir = mkdtempSync(join(tmpdir(), 'platform-forms-'));
    dirs.push(dataDir);
    let server = await startServerProcess({ dataDir });
    const registered = await call(server, 'POST', '/api/v1/auth/register', { body: { email: 'forms@example.com', username: 'forms', password: 'correct horse battery' } });
    expect(registered.status).toBe(201);
    const token = registered.body.access_token as string;

    const states = ['start', ...Array.from({ length: N }, (_, i) => `s${i}`)];
    const transitions = states.flatMap((from) => states.filter((to) => to !== from).map((to) => ({ from, to })));
    expect((await call(server, 'PUT', '/api/v1/forms/state-machines/crash', { token, body: { states, initial: 'start', transitions } })).status).toBe(200);
    const forms: string[] = [];
    for (let i = 0; i < N; i++) {
      const created = await call(server, 'POST', '/api/v1/forms', {
        token,
        body: { name: `f${i}`, title: `F${i}`, schema: { type: 'object', properties: { n: { type: 'integer' } } }, execution: { on_valid_submission: [{ kind: 'fsm', fsm_name: 'crash', target_state: `s${i}` }] } },
      });
      expect(created.status).toBe(201);
      expect((await call(server, 'POST', `/api/v1/forms/${created.body.form_id}/status`, { token, body: { status: 'active' } })).status).toBe(200);
      forms.push(created.body.form_id);
    }

    // Submit to every form at once, and kill the node the moment the replies are in.
    const acks = await Promise.all(forms.map((form_id, n) => call(server, 'POST', `/api/v1/forms/${form_id}/submissions`, { token, body: { data: { n } } })));
    expect(acks.map((ack) => ack.status)).toEqual(forms.map(() => 201));
    expect((await server.stop('SIGKILL')).signal).toBe('SIGKILL');
    server = await startServerProcess({ dataDir, port: server.port });

    for (const [i, ack] of acks.entries()) {
      await until(async () => {
        const read = await call(server, 'GET', `/api/v1/forms/${forms[i]}/submissions/${ack.body.submission_id}`, { token });
        return read.body?.execution_status?.fsm?.[0]?.status === 'succeeded';
      }, `the hook of submission ${i} to succeed after the restart`);
    }
    const machine = await call(server, 'GET', '/api/v1/forms/state-machines/crash', { token });
    expect(machine.body.moves).toBe(N);
    const causes = machine.body.history.map((move: { cause: { submission_id: string } }) => move.cause.submission_id).sort();
    expect(causes).toEqual(acks.map((ack) => ack.body.submission_id).sort());
    // Each hook ran in one attempt.
    for (const [i, ack] of acks.entries()) {
      const read = await call(server, 'GET', `/api/v1/forms/${forms[i]}/submissions/${ack.body.submission_id}`, { token });
      expect(read.body.execution_status.fsm[0].attempts).toBe(1);
    }
    await server.stop('SIGTERM');
  }, 90_000);
});
