import { describe, expect, it } from 'vitest';
import { clusterView, embeddedView } from '../../http/cluster-view.js';

/** The operators' cluster view (http/cluster-view.ts): this node's status merged with the leaders' published lag. */
describe('clusterView', () => {
  const status = {
    node_id: 'n1',
    draining: false,
    view: { fresh: true, revision: 10 },
    members: [
      { node_id: 'n2', http_url: 'http://h2', grpc_address: 'h2:9', draining: false, view_fresh: true },
      { node_id: 'n1', http_url: 'http://h1', grpc_address: 'h1:9', draining: false, view_fresh: false },
    ],
    partitions: [
      { partition: 0, leader: 'n1', epoch: 5, isr: ['n1', 'n2'] },
      { partition: 1, leader: 'n2', epoch: 7, isr: ['n2'] },
      { partition: 2, leader: null, epoch: null, isr: ['n1'] },
    ],
  };

  it('counts what each member leads and follows in sync, sorted by id', () => {
    const view = clusterView(status, []);
    expect(view.mode).toBe('cluster');
    expect(view.node_id).toBe('n1');
    expect(view.members).toEqual([
      { node_id: 'n1', http_url: 'http://h1', draining: false, view_fresh: false, leads: 1, follows: 0 },
      { node_id: 'n2', http_url: 'http://h2', draining: false, view_fresh: true, leads: 1, follows: 1 },
    ]);
  });

  it('takes followers and lag from the current leader\'s published record only', () => {
    const view = clusterView(status, [
      // n1 led partition 1 before n2: what it still says of it is ignored.
      { node_id: 'n1', at: '', leading: [0, 1], lag: { 0: { n2: 3 }, 1: { n2: 99 } }, followers: { 0: { n2: 'in_sync' }, 1: { n2: 'in_sync' } }, forwarded_total: 0 },
      { node_id: 'n2', at: '', leading: [1], lag: { 1: { n1: 40 } }, followers: { 1: { n1: 'catching_up' } }, forwarded_total: 0 },
    ]);
    expect(view.partitions[0].followers).toEqual([{ node_id: 'n2', mode: 'in_sync', lag: 3 }]);
    expect(view.partitions[1].followers).toEqual([{ node_id: 'n1', mode: 'catching_up', lag: 40 }]);
    expect(view.partitions[2].followers).toEqual([]);
  });

  it('lists in-sync followers with unknown lag before their leader published', () => {
    expect(clusterView(status, []).partitions[0].followers).toEqual([{ node_id: 'n2', mode: 'in_sync', lag: null }]);
  });

  it('embedded: one member leading every partition alone', () => {
    const view = embeddedView(3, 'http://x');
    expect(view.members).toEqual([{ node_id: 'embedded', http_url: 'http://x', draining: false, view_fresh: true, leads: 3, follows: 0 }]);
    expect(view.partitions.map((p) => p.leader)).toEqual(['embedded', 'embedded', 'embedded']);
  });
});
