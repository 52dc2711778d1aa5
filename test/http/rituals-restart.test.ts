import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/index.js';
import { startTestNode } from '../helpers/node.js';
import { ok, restartedNodes } from '../helpers/restart.js';
import { settle } from '../helpers/runtime.js';

/**
 * Ritual alarms are durable: an attempt armed on one node fails at its
 * deadline on the node started after it on the same data directory, with no
 * request, and the history and analytics (fed by the alarm's outbox deltas)
 * show it.
 */
const nodes = restartedNodes();
const base = '/api/v1/rituals';


describe('rituals across a restart', () => {
  it('the deadline alarm fires on the restarted node; definitions and the attempt are kept', async () => {
    const start = Date.now();
    const first = await startTestNode({ clock: new ManualClock(start), config: { accessTokenTtlSeconds: 86_400 } });
    nodes.push(first);
    const user = await first.newUser('ritualrestart');
    const token = user.token;
    const created = ok(await first.request('POST', `${base}/definitions`, { token, body: { name: 'solo', parts: [{ part_id: 'p', assigned_to: user.user_id }], window_ms: 1_000, arm_ttl_seconds: 60 } }), 201);
    const armed = ok(await first.request('POST', `${base}/${created.ritual_def_id}/arm`, { token, body: {} }), 201);
    await first.stop();

    const later = new ManualClock(start + 120_000);
    const second = await startTestNode({ dataDir: first.dataDir, clock: later, config: { accessTokenTtlSeconds: 86_400 } });
    nodes.push(second);
    let failed: { status: string; report: { reason: string } } | undefined;
    for (let i = 0; i < 400 && !failed; i++) {
      const history = ok(await second.request('GET', `${base}/${created.ritual_def_id}/history?status=failed`, { token }));
      failed = history.attempts[0];
      if (!failed) {
        later.advance(0);
        await settle(2);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
    expect(failed).toMatchObject({ attempt_id: armed.attempt_id, status: 'failed', report: { reason: 'deadline', late: [{ part_id: 'p', performed: false }] } });
    expect(ok(await second.request('GET', `${base}/${created.ritual_def_id}/analytics`, { token }))).toMatchObject({ total_attempts: 1, failed: 1, success_rate: 0 });
    expect(ok(await second.request('GET', `${base}/definitions/${created.ritual_def_id}`, { token }))).toMatchObject({ name: 'solo', version: 1 });
  }, 120_000);
});
