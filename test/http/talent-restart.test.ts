import { describe, expect, it } from 'vitest';
import { startTestNode } from '../helpers/node.js';
import { ok, restartedNodes } from '../helpers/restart.js';

/**
 * Talent state survives a node restart (graceful stop, a new node on the same
 * data directory): curves, tree versions and the list, the wallet with its
 * remembered XP event ids, allocations with their tree version, analytics.
 */
const nodes = restartedNodes();
const base = '/api/v1/talent';


describe('talent across a restart', () => {
  it('keeps definitions, wallet, event ids, allocations and analytics', async () => {
    const first = await startTestNode();
    nodes.push(first);
    const user = await first.newUser('talentrestart');
    const token = user.token;
    ok(await first.request('POST', `${base}/curves`, { token, body: { curve_id: 'c', kind: 'table', max_level: 4, points_per_level: [{ currency: 'tp', amount: 3 }], params: { table: [10, 20, 30] } } }), 201);
    const tree = {
      tree_id: 'mage',
      name: 'Mage',
      point_currencies: ['tp'],
      tiers: [{ tier: 1 }],
      exclusive_groups: [{ id: 'school' }],
      nodes: [
        { id: 'fire', name: 'Fire', tier: 1, max_rank: 2, cost_per_rank: [{ currency: 'tp', amount: 1 }], exclusive_group: 'school' },
        { id: 'ice', name: 'Ice', tier: 1, cost_per_rank: [{ currency: 'tp', amount: 1 }], exclusive_group: 'school' },
        { id: 'focus', name: 'Focus', tier: 1, max_rank: 5, cost_per_rank: [{ currency: 'tp', amount: 1 }] },
      ],
    };
    ok(await first.request('POST', `${base}/definitions`, { token, body: tree }), 201);
    ok(await first.request('PUT', `${base}/definitions/mage`, { token, body: { ...tree, description: 'v2', migration: { from_version: 1 } } }));
    const xp = ok(await first.request('POST', `${base}/xp/events`, { token, body: { curve_id: 'c', amount: 35 }, headers: { 'idempotency-key': 'boss-1' } }));
    expect(xp).toMatchObject({ old_level: 1, new_level: 3, granted: { tp: 6 } });
    for (const node_id of ['fire', 'fire', 'focus']) ok(await first.request('POST', `${base}/mage/allocate`, { token, body: { node_id } }));
    const state = ok(await first.request('GET', `${base}/mage/state`, { token }));
    const wallet = ok(await first.request('GET', `${base}/me/wallet`, { token }));
    let paths: unknown = null;
    for (let i = 0; i < 400 && !paths; i++) {
      const view = ok(await first.request('GET', `${base}/mage/analytics/paths`, { token }));
      if (view.nodes.find((node: { node_id: string }) => node.node_id === 'focus').total_ranks_allocated === 1) paths = view;
      else await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(paths).not.toBeNull();
    await first.stop();

    const second = await startTestNode({ dataDir: first.dataDir });
    nodes.push(second);
    expect(ok(await second.request('GET', `${base}/curves/c`, { token })).params).toEqual({ table: [10, 20, 30] });
    expect(ok(await second.request('GET', `${base}/definitions/mage`, { token }))).toMatchObject({ version: 2, description: 'v2', active: true });
    expect(ok(await second.request('GET', `${base}/definitions`, { token })).pagination.total).toBe(2);
    expect(ok(await second.request('GET', `${base}/me/wallet`, { token }))).toEqual(wallet);
    expect(ok(await second.request('GET', `${base}/mage/state`, { token }))).toEqual(state);
    expect(ok(await second.request('POST', `${base}/xp/events`, { token, body: { curve_id: 'c', amount: 35 }, headers: { 'idempotency-key': 'boss-1' } }))).toEqual({ ...xp, idempotent: true });
    expect(ok(await second.request('GET', `${base}/mage/analytics/paths`, { token }))).toEqual(paths);
    const conflict = await second.request('POST', `${base}/mage/allocate`, { token, body: { node_id: 'ice' } });
    expect(conflict.status).toBe(409);
    expect(conflict.body.code).toBe('talent_exclusive_group');
    expect(ok(await second.request('POST', `${base}/mage/allocate`, { token, body: { node_id: 'focus' } })).ranks).toEqual({ fire: 2, focus: 2 });
  });
});
