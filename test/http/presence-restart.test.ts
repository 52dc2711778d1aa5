import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../runtime/index.js';
import { PRESENCE_CONTEXT_KIND, presenceContextKey } from '../../actors/presence/messages.js';
import { startTestNode, type TestNode } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';

/**
 * Sessions, their activity and the context's durable alarm survive a node
 * restart (graceful stop, new node on the same data directory).
 */
const S = 1000;
const nodes: TestNode[] = [];

afterAll(async () => {
  for (const node of nodes) await node.stop().catch(() => undefined);
  if (nodes[0]) rmSync(nodes[0].dataDir, { recursive: true, force: true });
});

describe('presence across a restart', () => {
  it('keeps sessions, recorded activity, geo index and the sweep alarm', async () => {
    const clock = new ManualClock(Date.UTC(2026, 2, 1, 9, 0, 0) + 250);
    const first = await startTestNode({ clock });
    nodes.push(first);
    const user = await first.newUser('presrestart');
    const token = user.token;
    const id = 'restart-room';
    const created = await first.request('POST', '/api/v1/presence/contexts', {
      token,
      body: { id, kind: 'room', geo: { enabled: true }, heartbeat: { idle_after_seconds: 10, stale_after_seconds: 20, ttl_seconds: 30 }, capacity: { max_active: 5 } },
    });
    expect(created.status, created.text).toBe(201);
    const open = async (node: TestNode, body: unknown) => {
      const res = await node.request('POST', `/api/v1/presence/${id}/heartbeat`, { token, body });
      expect(res.status, res.text).toBe(200);
      return res.body;
    };
    const early = await open(first, { subject: { id: 'early', kind: 'user' }, geo: { lat: 40.0, lon: -3.7 }, metadata: { seat: 4 } });
    clock.advance(5 * S);
    await settle();
    const late = await open(first, { subject: { id: 'late', kind: 'agent' }, state: 'busy', geo: { lat: 40.001, lon: -3.7 } });
    clock.advance(7 * S);
    await settle();
    // early went idle at +10 s and the alarm (due +10.75 s, rounded up) recorded it before the stop.
    const beforeList = await first.request('GET', `/api/v1/presence/${id}/list`, { token });
    expect(beforeList.body.sessions.map((s: any) => [s.subject.id, s.activity])).toEqual([['early', 'idle'], ['late', 'active']]);
    const key = presenceContextKey(user.user_id, id);
    const sweep = await first.node.runtime.ask<{ reconciled: number }>(PRESENCE_CONTEXT_KIND, key, { op: 'sweep' });
    expect(sweep.reconciled).toBe(0);
    await first.stop();

    // ---- a new node on the same data ----
    const second = await startTestNode({ clock, dataDir: first.dataDir });
    nodes.push(second);
    const afterList = await second.request('GET', `/api/v1/presence/${id}/list`, { token });
    expect(afterList.status, afterList.text).toBe(200);
    expect(afterList.body.sessions).toEqual(beforeList.body.sessions);
    expect(afterList.body.sessions[0].metadata).toEqual({ seat: 4 });
    const context = await second.request('GET', `/api/v1/presence/contexts/${id}`, { token });
    expect(context.body.context).toEqual(created.body);
    expect(context.body.occupancy).toMatchObject({ active: 1, idle: 1, total: 2, capacity_remaining: 3 });
    const near = await second.request('GET', `/api/v1/presence/${id}/nearby?lat=40&lon=-3.7&radius_meters=500`, { token });
    expect(near.body.sessions.map((s: any) => s.session_id)).toEqual([early.session_id, late.session_id]);
    // The existing session can be refreshed on the new node.
    const refreshed = await open(second, { session_id: late.session_id, state: 'thinking' });
    expect(refreshed).toMatchObject({ opened: false, state: 'thinking' });

    // No request touches the context from here: only the durable alarm can record the transitions.
    // early: stale at +20 s, expired at +30 s.
    clock.advance(9 * S);
    await settle();
    const sweptNothing = await second.request('POST', `/api/v1/presence/${id}/sweep`, { token });
    expect(sweptNothing.body).toMatchObject({ reconciled: 0, transitions: {}, expired: [] });
    const stale = await second.request('GET', `/api/v1/presence/${id}/list?activity=stale`, { token });
    expect(stale.body.sessions.map((s: any) => s.session_id)).toEqual([early.session_id]);

    // Restart again with only the alarm pending, let the context passivate, and let the alarm expire early.
    await second.stop();
    const third = await startTestNode({ clock, dataDir: first.dataDir });
    nodes.push(third);
    // Nothing has asked the context actor anything on this node; its alarm is back in the schedule.
    expect(third.node.runtime.pendingAlarmCount()).toBeGreaterThanOrEqual(1);
    clock.advance(10 * S);
    await settle();
    // The alarm woke the context actor by itself, removed early and recorded it.
    const afterExpiry = await third.request('POST', `/api/v1/presence/${id}/sweep`, { token });
    expect(afterExpiry.body).toMatchObject({ reconciled: 0, expired: [] });
    const remaining = await third.request('GET', `/api/v1/presence/${id}/list`, { token });
    expect(remaining.body.sessions.map((s: any) => s.session_id)).toEqual([late.session_id]);
    const lastSeen = await third.request('GET', '/api/v1/presence/subjects/early/last-seen', { token });
    expect(lastSeen.body).toMatchObject({ online: false, contexts: [{ context_id: id, online: false }] });
  });
});
