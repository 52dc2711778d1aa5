import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionOf } from '../../runtime/index.js';
import { LOCK_KIND, lockActorKey } from '../../actors/locks/messages.js';
import { USER_KIND } from '../../actors/accounts/messages.js';
import { API_KEY_KIND } from '../../actors/api-keys/messages.js';
import { startCluster, waitClusterSettled, type ClusterHandle } from '../helpers/cluster.js';
import { call, clusterStatus, lockPath, registerUser, sleep } from './support/client.js';

/**
 * No single partition on every request's path (docs/api/accounts.md, Tokens):
 * both replicas of a user's partition are SIGKILLed; the third node keeps
 * serving that user's requests that need only other partitions, from its
 * last positive session check, while a session it never checked, or one
 * logged out before the outage, gets no such grace. The same for API keys:
 * a key of that user checked on the third node keeps working there, a key
 * deleted before the outage does not.
 */
const PARTITIONS = 8;

describe('cluster: session checks while the user\'s partition has no live replica', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    // A shorter forward deadline keeps the 503s below quick (the fallback's own wait is 1 s).
    cluster = await startCluster({ nodes: 3, replicationFactor: 2, partitions: PARTITIONS, leaseTtlSeconds: 2, env: { FORWARD_DEADLINE_MS: '4000' } });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it('answers from the last positive check, and never for a session never checked there or revoked', async () => {
    // Three users of one partition P; T is the node that holds no copy of P.
    const byPartition = new Map<number, { token: string; userId: string }[]>();
    let users: { token: string; userId: string }[] | undefined;
    for (let i = 0; !users && i < 60; i++) {
      const user = await registerUser(cluster.nodes[i % 3].url, `degrade${i}`);
      const p = partitionOf(USER_KIND, user.userId, PARTITIONS);
      const list = [...(byPartition.get(p) ?? []), user];
      byPartition.set(p, list);
      if (list.length === 3) users = list;
    }
    expect(users).toBeDefined();
    const [checked, neverChecked, loggedOut] = users!;
    // The replicas of P, once every partition has its full in-sync set again: the registrations above
    // (password hashing on three nodes sharing two cores) can hold a follower past the replication timeout.
    await waitClusterSettled(cluster);
    const status = (await clusterStatus(cluster.nodes[0].url))!;
    const p = partitionOf(USER_KIND, checked.userId, PARTITIONS);
    const replicas = status.partitions[p].isr;
    expect(replicas).toHaveLength(2);
    const third = cluster.nodes.find((n) => !replicas.includes(n.nodeId))!;
    // A lock whose partition T holds a copy of (T leads it once the others are gone).
    let lockKey = '';
    for (let i = 0; lockKey === ''; i++) {
      const q = partitionOf(LOCK_KIND, lockActorKey(checked.userId, 'degrade', `k${i}`), PARTITIONS);
      if (q !== p && status.partitions[q].isr.includes(third.nodeId)) lockKey = `k${i}`;
    }
    const path = lockPath('degrade', lockKey);
    expect((await call(third.url, 'POST', path, checked.token, { owner_id: 'w', ttl_seconds: 600 })).status).toBe(200);
    expect((await call(third.url, 'GET', path, loggedOut.token)).status).toBe(200);
    expect((await call(third.url, 'POST', '/api/v1/auth/logout', loggedOut.token, {})).status).toBeLessThan(300);
    // API keys of the same user, checked on T. The one deleted is one whose own partition will be unavailable too,
    // so only the drop (sent to T by the deleting node before it answers) keeps T from serving it.
    const other = cluster.nodes.find((n) => replicas.includes(n.nodeId))!;
    const createKey = async (name: string) => {
      const created = await call(other.url, 'POST', '/api/v1/auth/api-keys', checked.token, { name, scopes: ['locks:read'] });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      expect((await call(third.url, 'GET', path, created.body.key)).status).toBe(200);
      return { key: created.body.key as string, id: created.body.api_key_id as string };
    };
    const keptKey = (await createKey('kept')).key;
    let deleted: { key: string; id: string } | undefined;
    for (let i = 0; !deleted && i < 40; i++) {
      const candidate = await createKey(`deleted${i}`);
      if (!status.partitions[partitionOf(API_KEY_KIND, candidate.id, PARTITIONS)].isr.includes(third.nodeId)) deleted = candidate;
    }
    expect(deleted).toBeDefined();
    const deletedKey = deleted!.key;
    expect((await call(other.url, 'DELETE', `/api/v1/auth/api-keys/${deleted!.id}`, checked.token)).status).toBe(200);
    expect((await call(third.url, 'GET', path, keptKey)).status).toBe(200);

    for (const node of cluster.nodes.filter((n) => replicas.includes(n.nodeId))) await node.kill('SIGKILL');
    const killedAt = Date.now();
    // Wait until T serves the lock's partition, then past the 5 s fresh window of the check above.
    for (;;) {
      const view = await clusterStatus(third.url);
      if (view?.partitions.every((row) => row.leader === null || row.leader === third.nodeId) && view.partitions[p].leader === null) break;
      if (Date.now() - killedAt > 15_000) throw new Error(`T does not see the outage: ${JSON.stringify(view?.partitions)}`);
      await sleep(100);
    }
    await sleep(Math.max(0, 5_500 - (Date.now() - killedAt)));

    const started = Date.now();
    const read = await call(third.url, 'GET', path, checked.token);
    const took_ms = Date.now() - started;
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body.is_locked).toBe(true);
    // It waited for P about 1 s, not FORWARD_DEADLINE_MS.
    expect(took_ms).toBeLessThan(3_000);
    const [never, revoked] = await Promise.all([call(third.url, 'GET', lockPath('degrade', 'x'), neverChecked.token), call(third.url, 'GET', path, loggedOut.token)]);
    expect(never.status).toBe(503);
    expect(never.body.code).toBe('partition_unavailable');
    expect(revoked.status).toBe(503);
    expect(revoked.body.code).toBe('partition_unavailable');
    console.log(`session degrade: served from the last positive check ${started - killedAt} ms after both replicas died (request took ${took_ms} ms)`);
    expect(third.output()).toContain("session check answered from this node's last positive check");

    // The API key: its user's partition has no live replica (and maybe its own); T answers from its last check of it.
    const keyStarted = Date.now();
    const byKey = await call(third.url, 'GET', path, keptKey);
    const keyTook_ms = Date.now() - keyStarted;
    expect(byKey.status, JSON.stringify(byKey.body)).toBe(200);
    expect(byKey.body.is_locked).toBe(true);
    expect(keyTook_ms).toBeLessThan(3_000);
    // The deleted key: its partition is unavailable too, and T dropped its last check when it was deleted.
    const gone = await call(third.url, 'GET', path, deletedKey);
    expect(gone.status, JSON.stringify(gone.body)).toBe(503);
    expect(gone.body.code).toBe('partition_unavailable');
    expect(third.output()).toContain("API key check answered from this node's last positive check");
  }, 90_000);
});
