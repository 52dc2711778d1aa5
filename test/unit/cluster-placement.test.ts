import { describe, expect, it } from 'vitest';
import { rankNodes, replicaSet } from '../../cluster/placement.js';

const PARTITIONS = 256;
const nodesOf = (n: number) => Array.from({ length: n }, (_, i) => `n${i + 1}`);
const preferred = (p: number, nodes: string[]) => replicaSet(p, nodes, 2)[0];

function leadCounts(nodes: string[]): Map<string, number> {
  const counts = new Map(nodes.map((n) => [n, 0]));
  for (let p = 0; p < PARTITIONS; p++) {
    const leader = preferred(p, nodes);
    counts.set(leader, counts.get(leader)! + 1);
  }
  return counts;
}

describe('placement: rendezvous hashing', () => {
  it('is deterministic and does not depend on the order of the member list', () => {
    const nodes = nodesOf(5);
    const reversed = [...nodes].reverse();
    for (let p = 0; p < PARTITIONS; p++) {
      const ranking = rankNodes(p, nodes);
      expect(rankNodes(p, nodes)).toEqual(ranking);
      expect(rankNodes(p, reversed)).toEqual(ranking);
      expect(rankNodes(p, new Set(nodes))).toEqual(ranking);
      expect([...ranking].sort()).toEqual(nodes);
    }
    // Pinned values: the ranking must not change across versions (nodes of a cluster in a rolling upgrade must agree).
    expect(rankNodes(0, nodesOf(4))).toEqual(['n4', 'n2', 'n3', 'n1']);
    expect(rankNodes(1, nodesOf(4))).toEqual(['n1', 'n4', 'n3', 'n2']);
    expect(rankNodes(2, nodesOf(4))).toEqual(['n3', 'n1', 'n2', 'n4']);
    expect(rankNodes(63, nodesOf(4))).toEqual(['n2', 'n4', 'n3', 'n1']);
  });

  it('the replica set is the ranking prefix, of RF distinct nodes (at least 1, at most all)', () => {
    const nodes = nodesOf(4);
    for (let p = 0; p < 64; p++) {
      const ranking = rankNodes(p, nodes);
      for (const rf of [1, 2, 3, 4, 6]) {
        const set = replicaSet(p, nodes, rf);
        expect(set).toEqual(ranking.slice(0, Math.min(rf, nodes.length)));
        expect(new Set(set).size).toBe(set.length);
      }
      expect(replicaSet(p, nodes, 0)).toEqual(ranking.slice(0, 1));
    }
    expect(replicaSet(7, [], 2)).toEqual([]);
  });

  it('spreads leadership: over 256 partitions, each of 3..5 nodes leads within ±35% of the mean', () => {
    for (let n = 3; n <= 5; n++) {
      const nodes = nodesOf(n);
      const mean = PARTITIONS / n;
      for (const [node, count] of leadCounts(nodes)) {
        expect(count, `${node} of ${n} nodes`).toBeGreaterThanOrEqual(mean * 0.65);
        expect(count, `${node} of ${n} nodes`).toBeLessThanOrEqual(mean * 1.35);
      }
    }
    // Also with ids that differ in one character only, and with arbitrary names.
    for (const nodes of [['node-1', 'node-2', 'node-3', 'node-4'], ['alpha', 'beta', 'gamma']]) {
      const mean = PARTITIONS / nodes.length;
      for (const count of leadCounts(nodes).values()) {
        expect(count).toBeGreaterThanOrEqual(mean * 0.65);
        expect(count).toBeLessThanOrEqual(mean * 1.35);
      }
    }
  });

  it('adding a 4th node to 3 moves about 1/4 of the preferred leaders, every one TO the new node', () => {
    const before = nodesOf(3);
    const after = nodesOf(4);
    let moved = 0;
    for (let p = 0; p < PARTITIONS; p++) {
      const was = preferred(p, before);
      const is = preferred(p, after);
      if (was !== is) {
        moved++;
        expect(is, `partition ${p} moved from ${was}`).toBe('n4');
      }
    }
    expect(moved / PARTITIONS).toBeGreaterThanOrEqual(0.1);
    expect(moved / PARTITIONS).toBeLessThanOrEqual(0.4);
  });

  it('removing a node moves only the partitions it led, and the others keep their whole ranking order', () => {
    for (let n = 3; n <= 5; n++) {
      const nodes = nodesOf(n);
      for (const removed of nodes) {
        const remaining = nodes.filter((x) => x !== removed);
        let moved = 0;
        for (let p = 0; p < PARTITIONS; p++) {
          const was = preferred(p, nodes);
          const is = preferred(p, remaining);
          if (was !== is) {
            moved++;
            expect(was, `partition ${p} moved although ${removed} did not lead it`).toBe(removed);
          }
          // The new preferred node of a moved partition is the old second choice (it already holds a replica with RF 2).
          if (was === removed) expect(is).toBe(replicaSet(p, nodes, 2)[1]);
          expect(rankNodes(p, remaining)).toEqual(rankNodes(p, nodes).filter((x) => x !== removed));
        }
        expect(moved).toBe(leadCounts(nodes).get(removed));
      }
    }
  });
});
