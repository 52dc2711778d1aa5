import { describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { expectError, startTestNode } from '../helpers/node.js';
import { ok, restartedNodes } from '../helpers/restart.js';
import { settle } from '../helpers/runtime.js';
import { historyLines, wonLotteryHistory } from '../helpers/vault.js';

/**
 * A lottery won before its unlock_at, across a node restart (graceful stop,
 * a new node on the same data directory): nothing is revealed before the
 * time, and the stored alarm opens the attestation once, after the restart.
 */
const nodes = restartedNodes();
const base = '/api/v1/vault/attestations';


describe('vault across a restart', () => {
  it('a lottery win plus the later time alarm opens a combined lock exactly once', async () => {
    const first = await startTestNode({ clock: 'manual', config: { accessTokenTtlSeconds: 86_400 } });
    nodes.push(first);
    const [alice, bob] = await Promise.all([first.newUser('vaultrestart'), first.newUser('vaultrestart')]);
    const unlock_at = new Date(first.clock.now() + 3600_000).toISOString();
    const created = ok(
      await first.request('POST', base, { token: alice.token, body: { content: { data: 'after the restart', type: 'text/plain' }, lock_config: { type: 'lottery', unlock_at, lottery: { odds_per_entry: 1 } } } }),
      201,
    );
    const id = created.attestation_id;
    const entered = ok(await first.request('POST', `${base}/${id}/lottery/enter`, { token: bob.token, body: { entry_count: 1 } }));
    expect(entered).toMatchObject({ won: true, revealed: false, content_key: null, status: 'partially_unlocked' });
    expectError(await first.request('POST', `${base}/${id}/unlock`, { token: bob.token }), 409, 'attestation_locked');
    await first.stop();

    const second = await startTestNode({ clock: 'manual', dataDir: first.dataDir, config: { accessTokenTtlSeconds: 86_400 } });
    nodes.push(second);
    const clock = second.clock as ManualClock;
    // The new node's clock starts at the wall clock: still before unlock_at.
    expectError(await second.request('POST', `${base}/${id}/unlock`, { token: bob.token }), 409, 'attestation_locked');
    clock.advance(3600_000);
    let status = '';
    for (let i = 0; i < 200 && status !== 'unlocked'; i++) {
      status = ok(await second.request('GET', `${base}/${id}/status`, { token: bob.token })).status;
      clock.advance(0);
      await settle(2);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(status).toBe('unlocked');
    const open = ok(await second.request('POST', `${base}/${id}/unlock`, { token: bob.token }));
    expect(open).toMatchObject({ unlock_method: 'combined:time_lock+lottery', revealed: { data: 'after the restart' } });
    const history = ok(await second.request('GET', `${base}/${id}/history`, { token: alice.token }));
    expect(historyLines(history)).toEqual(wonLotteryHistory(alice.user_id, bob.user_id));
  });
});
