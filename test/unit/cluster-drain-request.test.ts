import { describe, expect, it } from 'vitest';
import { requestDrain } from '../../cluster/drain-request.js';
import { clusterKeys } from '../../cluster/etcd-keys.js';

/** The drain request both the CLI and POST /admin/cluster/nodes/{node_id}/drain write (cluster/drain-request.ts). */
describe('requestDrain', () => {
  const keys = clusterKeys('/t/');
  const now = new Date('2026-11-25T12:00:00.000Z');
  const recorder = () => {
    const writes: [string, string][] = [];
    return { writes, write: async (key: string, value: string) => void writes.push([key, value]) };
  };
  const members = [
    { node_id: 'n1', draining: false },
    { node_id: 'n2', draining: false },
  ];

  it('writes drain/<node> with the time of the request', async () => {
    const { writes, write } = recorder();
    expect(await requestDrain(write, keys, members, 'n2', now)).toEqual({ ok: true, request: { node_id: 'n2', requested_at: '2026-11-25T12:00:00.000Z' } });
    expect(writes).toEqual([['/t/drain/n2', JSON.stringify({ requested_at: '2026-11-25T12:00:00.000Z' })]]);
  });

  it('refuses a node that is not a member, writing nothing', async () => {
    const { writes, write } = recorder();
    expect(await requestDrain(write, keys, members, 'n9', now)).toEqual({ ok: false, reason: 'not_member' });
    expect(writes).toEqual([]);
  });

  it('refuses the only serving member: nobody could take its partitions', async () => {
    const { writes, write } = recorder();
    expect(await requestDrain(write, keys, [{ node_id: 'n1', draining: false }], 'n1', now)).toEqual({ ok: false, reason: 'no_other_node' });
    expect(await requestDrain(write, keys, [{ node_id: 'n1', draining: false }, { node_id: 'n2', draining: true }], 'n1', now)).toEqual({ ok: false, reason: 'no_other_node' });
    expect(writes).toEqual([]);
  });

  it('passes on a failed write (the caller reports it)', async () => {
    await expect(requestDrain(async () => Promise.reject(new Error('etcd down')), keys, members, 'n1', now)).rejects.toThrow('etcd down');
  });
});
