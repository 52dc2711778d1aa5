import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionOf } from '../../runtime/index.js';
import { LOCK_KIND, lockActorKey } from '../../actors/locks/messages.js';
import { WAITING_ROOM_KIND, waitingRoomKey } from '../../actors/waiting-rooms/messages.js';
import { startCluster, waitClusterSettled, waitReady, type ClusterHandle } from '../helpers/cluster.js';
import { call, clusterStatus, lockPath, registerUser, sleep } from './support/client.js';

/**
 * The cluster, for real: a private etcd, node processes on loopback, HTTP
 * clients. Each scenario is one describe with its own cluster, so a failure
 * in one does not cascade.
 */
const PARTITIONS = 16;

function liveUrls(cluster: ClusterHandle, except: string[] = []): string[] {
  return cluster.nodes.filter((n) => n.alive && !except.includes(n.nodeId)).map((n) => n.url);
}

async function leaderOfLock(url: string, tenant: string, namespace: string, key: string): Promise<string | null> {
  const p = partitionOf(LOCK_KIND, lockActorKey(tenant, namespace, key), PARTITIONS);
  const status = await clusterStatus(url);
  return status?.partitions[p].leader ?? null;
}

describe('cluster: any node answers any request', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, replicationFactor: 2, partitions: PARTITIONS, leaseTtlSeconds: 2 });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it('a lock taken through one node reads the same through the others', async () => {
    const [a, b, c] = cluster.nodes.map((n) => n.url);
    const { token } = await registerUser(a, 'anyone');
    for (let i = 0; i < 8; i++) {
      const acquired = await call(a, 'POST', lockPath('anywhere', `k${i}`), token, { owner_id: 'w1', ttl_seconds: 600 });
      expect(acquired.status).toBe(200);
      for (const url of [b, c]) {
        const status = await call(url, 'GET', lockPath('anywhere', `k${i}`), token);
        expect(status.status).toBe(200);
        expect(status.body).toMatchObject({ is_locked: true, lock_id: acquired.body.lock_id, fence_token: acquired.body.fence_token });
      }
      // And a second acquirer through another node is refused.
      expect((await call(c, 'POST', lockPath('anywhere', `k${i}`), token, { owner_id: 'w2', ttl_seconds: 600 })).status).toBe(409);
    }
  });

  it("the admin lock list reads every partition from its leader, the same through every node", async () => {
    const [a, b, c] = cluster.nodes.map((n) => n.url);
    const { token, userId } = await registerUser(a, 'listing');
    const keys = Array.from({ length: 12 }, (_, i) => `L${String(i).padStart(2, '0')}`);
    for (const key of keys) expect((await call(b, 'POST', lockPath('listed', key), token, { owner_id: 'w', ttl_seconds: 600 })).status).toBe(200);
    // The keys' partitions are led by different nodes.
    const leaders = new Set(await Promise.all(keys.map((key) => leaderOfLock(a, userId, 'listed', key))));
    expect(leaders.size).toBeGreaterThan(1);
    const login = await call(a, 'POST', '/api/v1/auth/login', undefined, { login: cluster.adminEmail, password: cluster.adminPassword });
    for (const url of [a, b, c]) {
      const list = await call(url, 'GET', `/admin/locks?tenant=${userId}&namespace=listed&page_size=100`, login.body.access_token);
      expect(list.status).toBe(200);
      expect(list.body.pagination.total).toBe(keys.length);
      expect((list.body.locks as { key: string; is_locked: boolean }[]).map((l) => l.key)).toEqual(keys);
      const namespaces = await call(url, 'GET', `/admin/locks/namespaces?tenant=${userId}`, login.body.access_token);
      expect(namespaces.body.namespaces).toEqual([{ namespace: 'listed', key_count: keys.length }]);
    }
  });

  it('every node reports the same leaders, each partition led by one node with in-sync followers', async () => {
    const views = await Promise.all(cluster.nodes.map((n) => clusterStatus(n.url)));
    const leaders = views.map((v) => v!.partitions.map((p) => p.leader).join(','));
    expect(new Set(leaders).size).toBe(1);
    for (const p of views[0]!.partitions) {
      expect(p.leader).not.toBeNull();
      expect(p.isr[0]).toBe(p.leader);
    }
  });

  it('a ban through one node cuts the tokens off on every node at once, despite their session caches', async () => {
    const [a, b, c] = cluster.nodes.map((n) => n.url);
    const { token, userId } = await registerUser(b, 'banned');
    // Warm every node's session cache with this token.
    for (const url of [a, b, c]) for (let i = 0; i < 3; i++) expect((await call(url, 'GET', '/api/v1/auth/me', token)).status).toBe(200);
    const login = await call(a, 'POST', '/api/v1/auth/login', undefined, { login: cluster.adminEmail, password: cluster.adminPassword });
    expect((await call(c, 'POST', `/admin/auth/users/${userId}/ban`, login.body.access_token, { reason: 'test' })).status).toBe(200);
    // No wait: the ban's reply came after every node dropped the cached check.
    const after = await Promise.all([a, b, c].map((url) => call(url, 'GET', '/api/v1/auth/me', token)));
    expect(after.map((r) => r.status)).toEqual([401, 401, 401]);
  });

  it('the admin user list is the same through every node', async () => {
    const [a] = cluster.nodes.map((n) => n.url);
    for (let i = 0; i < 3; i++) await registerUser(a, `listed${i}`);
    const login = await call(a, 'POST', '/api/v1/auth/login', undefined, { login: cluster.adminEmail, password: cluster.adminPassword });
    expect(login.status).toBe(200);
    const lists = await Promise.all(cluster.nodes.map((n) => call(n.url, 'GET', '/admin/auth/users?page_size=100', login.body.access_token)));
    for (const list of lists) expect(list.status).toBe(200);
    const ids = lists.map((l) => (l.body.users as { id: string }[]).map((u) => u.id).sort().join(','));
    expect(new Set(ids).size).toBe(1);
    expect(lists[0].body.pagination.total).toBeGreaterThanOrEqual(4);
  });

  it("a submission's file uploaded through one node downloads through every node, the others passing the request on", async () => {
    const [a, b, c] = cluster.nodes.map((n) => n.url);
    const user = await registerUser(b, 'uploader');
    const form = await call(b, 'POST', '/api/v1/forms', user.token, {
      name: 'upload', title: 'Upload', schema: { type: 'object', properties: { name: { type: 'string' } } },
      multipart: { enabled: true, allowed_content_types: ['image/png'] },
    });
    expect(form.status, JSON.stringify(form.body)).toBe(201);
    expect((await call(c, 'POST', `/api/v1/forms/${form.body.form_id}/status`, user.token, { status: 'active' })).status).toBe(200);
    const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(4000, 9)]);
    const body = new FormData();
    body.append('data', JSON.stringify({ name: 'Ada' }));
    body.append('avatar', new Blob([png], { type: 'image/png' }), 'a.png');
    // Uploaded to node a: the file is on a's disk only.
    const upload = await fetch(`${a}/api/v1/forms/${form.body.form_id}/submissions/multipart`, { method: 'POST', headers: { authorization: `Bearer ${user.token}` }, body });
    expect(upload.status, await upload.clone().text()).toBe(201);
    const { submission_id } = (await upload.json()) as { submission_id: string };
    const read = await call(c, 'GET', `/api/v1/forms/${form.body.form_id}/submissions/${submission_id}`, user.token);
    const blob = read.body.attachments[0].blob_id as string;
    for (const url of [a, b, c]) {
      const response = await fetch(`${url}/api/v1/forms/${form.body.form_id}/submissions/${submission_id}/attachments/${blob}`, { headers: { authorization: `Bearer ${user.token}` } });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('image/png');
      expect(Buffer.from(await response.arrayBuffer()).equals(png)).toBe(true);
    }
    // Another user's token is refused by the holding node too, whichever node it reaches.
    const other = await registerUser(a, 'notuploader');
    const refused = await fetch(`${c}/api/v1/forms/${form.body.form_id}/submissions/${submission_id}/attachments/${blob}`, { headers: { authorization: `Bearer ${other.token}` } });
    expect([403, 404]).toContain(refused.status);
  });
});

describe('cluster: SIGKILL of one node under lock churn', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, replicationFactor: 2, partitions: PARTITIONS, leaseTtlSeconds: 2 });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it('keeps every acknowledged lock, never moves a fence token back, and serves every partition again', async () => {
    const first = cluster.nodes[0].url;
    const { token } = await registerUser(first, 'churner');
    const KEYS = 12;
    interface Ack {
      kind: 'acquire' | 'release';
      lock_id: string;
      fence: number;
      seq: number;
    }
    const acks = new Map<string, Ack[]>();
    /** Keys with a request whose outcome is unknown (its connection broke): their final state is not checked exactly. */
    const ambiguous = new Set<string>();
    let seq = 0;
    let running = true;
    let counter = 0;

    const worker = async (w: number) => {
      while (running) {
        const key = `c${Math.floor(Math.random() * KEYS)}`;
        const urls = liveUrls(cluster);
        const url = urls[Math.floor(Math.random() * urls.length)];
        const owner = `w${w}-${counter++}`;
        const acquired = await call(url, 'POST', lockPath('churn', key), token, { owner_id: owner, ttl_seconds: 600 });
        if (acquired.status === 200) {
          const list = acks.get(key) ?? [];
          list.push({ kind: 'acquire', lock_id: acquired.body.lock_id, fence: acquired.body.fence_token, seq: seq++ });
          acks.set(key, list);
          if (Math.random() < 0.7) {
            const released = await call(liveUrls(cluster)[0], 'DELETE', lockPath('churn', key), token, { lock_id: acquired.body.lock_id, owner_id: owner });
            if (released.status === 204) list.push({ kind: 'release', lock_id: acquired.body.lock_id, fence: acquired.body.fence_token, seq: seq++ });
            else ambiguous.add(key);
          }
        } else if (acquired.status !== 409) ambiguous.add(key);
      }
    };
    const workers = Array.from({ length: 6 }, (_, w) => worker(w));
    await sleep(1500);
    const victim = cluster.nodes[1];
    const killedAt = Date.now();
    await victim.kill('SIGKILL');
    // Every partition has a leader again, as the survivors see it.
    let recoveredAfter = Infinity;
    while (Date.now() - killedAt < 15_000) {
      const views = await Promise.all(liveUrls(cluster).map((u) => clusterStatus(u)));
      if (views.every((v) => v && v.partitions.every((p) => p.leader !== null && p.leader !== victim.nodeId))) {
        recoveredAfter = Date.now() - killedAt;
        break;
      }
      await sleep(50);
    }
    await sleep(2500);
    running = false;
    await Promise.all(workers);

    expect(recoveredAfter).toBeLessThan(6_000);
    let acquiresChecked = 0;
    for (const [key, list] of acks) {
      const fences = list.filter((a) => a.kind === 'acquire').map((a) => a.fence);
      for (let i = 1; i < fences.length; i++) expect(fences[i], `fence tokens of ${key}`).toBeGreaterThan(fences[i - 1]);
      const status = await call(liveUrls(cluster)[0], 'GET', lockPath('churn', key), token);
      expect(status.status).toBe(200);
      expect(status.body.fence_token).toBeGreaterThanOrEqual(fences.at(-1) ?? 0);
      if (ambiguous.has(key)) continue;
      // The latest acquisition is the one with the highest fence token, not the last answer this client read:
      // one owner's release and the next owner's acquire can be answered after the same commit, and their
      // responses, on two connections, read in either order.
      const latest = list.filter((a) => a.kind === 'acquire').reduce((x, y) => (y.fence > x.fence ? y : x));
      const released = list.some((a) => a.kind === 'release' && a.lock_id === latest.lock_id);
      if (!released) {
        expect(status.body).toMatchObject({ is_locked: true, lock_id: latest.lock_id, fence_token: latest.fence });
        acquiresChecked++;
      } else expect(status.body.is_locked).toBe(false);
    }
    expect([...acks.values()].flat().length).toBeGreaterThan(20);
    console.log(`churn: ${[...acks.values()].flat().length} acknowledged ops, partitions served again ${recoveredAfter} ms after SIGKILL, ${acquiresChecked} held locks checked`);
  }, 90_000);
});

describe('cluster: a paused leader (SIGSTOP past its lease)', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, replicationFactor: 2, partitions: PARTITIONS, leaseTtlSeconds: 2 });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it('answers neither stale state nor grants a held lock when it resumes', async () => {
    const first = cluster.nodes[0].url;
    const { token, userId } = await registerUser(first, 'pauser');
    // A key whose partition is led by a node other than the first (the test talks through the others).
    let key = '';
    let leaderId: string | null = null;
    for (let i = 0; i < 200 && !key; i++) {
      const leader = await leaderOfLock(first, userId, 'pause', `p${i}`);
      if (leader && leader !== cluster.nodes[0].nodeId) {
        key = `p${i}`;
        leaderId = leader;
      }
    }
    const leader = cluster.nodes.find((n) => n.nodeId === leaderId)!;
    const others = cluster.nodes.filter((n) => n !== leader);
    const held = await call(leader.url, 'POST', lockPath('pause', key), token, { owner_id: 'before', ttl_seconds: 600 });
    expect(held.status).toBe(200);

    await leader.kill('SIGSTOP');
    // Wait until the others see a new leader for the partition.
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && (await leaderOfLock(others[0].url, userId, 'pause', key)) === leader.nodeId) await sleep(100);
    expect(await leaderOfLock(others[0].url, userId, 'pause', key)).not.toBe(leader.nodeId);

    const released = await call(others[0].url, 'DELETE', lockPath('pause', key), token, { lock_id: held.body.lock_id, owner_id: 'before' });
    expect(released.status).toBe(204);
    const taken = await call(others[1].url, 'POST', lockPath('pause', key), token, { owner_id: 'after', ttl_seconds: 600 });
    expect(taken.status).toBe(200);
    expect(taken.body.fence_token).toBeGreaterThan(held.body.fence_token);

    await leader.kill('SIGCONT');
    // At once, through the resumed node: the new state, and no second grant.
    const [status, grab] = await Promise.all([
      call(leader.url, 'GET', lockPath('pause', key), token),
      call(leader.url, 'POST', lockPath('pause', key), token, { owner_id: 'stale', ttl_seconds: 600 }),
    ]);
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({ is_locked: true, owner_id: 'after', lock_id: taken.body.lock_id, fence_token: taken.body.fence_token });
    expect(grab.status).toBe(409);
    // And it settles back into the cluster.
    await waitClusterSettled(cluster, 20_000);
    const later = await call(leader.url, 'GET', lockPath('pause', key), token);
    expect(later.body).toMatchObject({ owner_id: 'after', fence_token: taken.body.fence_token });
  }, 90_000);
});

describe('cluster: join a fourth node and drain one while reads run', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, replicationFactor: 2, partitions: PARTITIONS, leaseTtlSeconds: 2 });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it('fails no request and loses no data', async () => {
    const first = cluster.nodes[0].url;
    const { token } = await registerUser(first, 'reader');
    const locks = new Map<string, { lock_id: string; fence_token: number }>();
    for (let i = 0; i < 16; i++) {
      const reply = await call(first, 'POST', lockPath('moves', `m${i}`), token, { owner_id: 'keeper', ttl_seconds: 600 });
      expect(reply.status).toBe(200);
      locks.set(`m${i}`, reply.body);
    }
    const drained = cluster.nodes[1];
    let reading = true;
    const failures: string[] = [];
    let reads = 0;
    const reader = async () => {
      while (reading) {
        const urls = liveUrls(cluster, [drained.nodeId]);
        const url = urls[Math.floor(Math.random() * urls.length)];
        const key = `m${Math.floor(Math.random() * 16)}`;
        const reply = await call(url, 'GET', lockPath('moves', key), token);
        reads++;
        if (reply.status !== 200 || reply.body.lock_id !== locks.get(key)!.lock_id) failures.push(`${url} ${key}: ${reply.status} ${JSON.stringify(reply.body).slice(0, 200)}`);
      }
    };
    const readers = Array.from({ length: 4 }, () => reader());

    const added = await cluster.addNode();
    await waitReady(added, 30_000);
    await waitClusterSettled(cluster, 30_000);
    const afterJoin = await clusterStatus(first);
    expect(afterJoin!.partitions.some((p) => p.leader === added.nodeId)).toBe(true);

    await drained.kill('SIGTERM');
    const exit = await drained.waitExit();
    expect(exit.code).toBe(0);
    await waitClusterSettled(cluster, 30_000);
    await sleep(500);
    reading = false;
    await Promise.all(readers);

    expect(failures).toEqual([]);
    expect(reads).toBeGreaterThan(50);
    const status = await clusterStatus(first);
    expect(status!.partitions.every((p) => p.leader !== null && p.leader !== drained.nodeId)).toBe(true);
    for (const [key, lock] of locks) {
      const reply = await call(added.url, 'GET', lockPath('moves', key), token);
      expect(reply.body).toMatchObject({ is_locked: true, lock_id: lock.lock_id, fence_token: lock.fence_token });
    }
  }, 120_000);
});

describe('cluster: a lagging follower', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, replicationFactor: 2, partitions: PARTITIONS, leaseTtlSeconds: 2, env: { REPLICATION_TIMEOUT_MS: '500' } });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it('leaves the in-sync set instead of stalling writes, catches up, and can take over with every write', async () => {
    const first = cluster.nodes[0].url;
    const { token, userId } = await registerUser(first, 'lagger');
    const status = (await clusterStatus(first))!;
    const p = partitionOf(LOCK_KIND, lockActorKey(userId, 'lag', 'l0'), PARTITIONS);
    const [leaderId, followerId] = status.partitions[p].isr;
    expect(followerId).toBeDefined();
    const leader = cluster.nodes.find((n) => n.nodeId === leaderId)!;
    const follower = cluster.nodes.find((n) => n.nodeId === followerId)!;
    // Keys of that same partition.
    const keys: string[] = [];
    for (let i = 0; keys.length < 6; i++) if (partitionOf(LOCK_KIND, lockActorKey(userId, 'lag', `l${i}`), PARTITIONS) === p) keys.push(`l${i}`);

    await follower.kill('SIGSTOP');
    const started = Date.now();
    const taken = new Map<string, { lock_id: string; fence_token: number }>();
    for (const key of keys) {
      const reply = await call(leader.url, 'POST', lockPath('lag', key), token, { owner_id: 'writer', ttl_seconds: 600 });
      expect(reply.status).toBe(200);
      taken.set(key, reply.body);
    }
    // One replication timeout (500 ms) for the first write, then no wait; plus, if the paused node led the
    // partition of the user's session, one failover (about 2 s) for the token checks. Not a stall of writes.
    expect(Date.now() - started).toBeLessThan(8_000);
    const shrunk = (await clusterStatus(leader.url))!.partitions[p].isr;
    expect(shrunk).not.toContain(followerId);

    await follower.kill('SIGCONT');
    const deadline = Date.now() + 20_000;
    let isr: string[] = [];
    while (Date.now() < deadline) {
      isr = (await clusterStatus(leader.url))?.partitions[p].isr ?? [];
      if (isr.includes(followerId)) break;
      await sleep(100);
    }
    expect(isr).toContain(followerId);

    // The caught-up follower is now the only other in-sync replica: kill the leader and read everything back.
    await leader.kill('SIGKILL');
    for (const [key, lock] of taken) {
      const reply = await call(follower.url, 'GET', lockPath('lag', key), token);
      expect(reply.status).toBe(200);
      expect(reply.body).toMatchObject({ is_locked: true, lock_id: lock.lock_id, fence_token: lock.fence_token });
    }
    expect((await clusterStatus(follower.url))!.partitions[p].leader).toBe(followerId);
  }, 90_000);

  it('exports cluster metrics', async () => {
    const live = cluster.nodes.find((n) => n.alive)!;
    const metrics = await fetch(`${live.url}/metrics`).then((r) => r.text());
    for (const name of ['cluster_partitions_led', 'cluster_leadership_changes_total', 'cluster_forwarded_requests_total', 'cluster_replication_lag_entries', 'cluster_partition_moves_total']) {
      expect(metrics).toContain(name);
    }
  });
});

describe('cluster: durable alarms fail over with their partition', () => {
  let cluster: ClusterHandle;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, replicationFactor: 2, partitions: PARTITIONS, leaseTtlSeconds: 2 });
  }, 60_000);
  afterAll(async ({}, suite) => cluster?.stop(suite));

  it("a waiting room's admission alarm keeps admitting on the new leader after its node is killed", async () => {
    const first = cluster.nodes[0].url;
    const { token, userId } = await registerUser(first, 'roomer');
    // A room whose partition is led by a node other than the first, so the test can keep talking to the first.
    let room = '';
    let leaderId: string | null = null;
    const status = (await clusterStatus(first))!;
    for (let i = 0; !room; i++) {
      const leader = status.partitions[partitionOf(WAITING_ROOM_KIND, waitingRoomKey(userId, `room${i}`), PARTITIONS)].leader;
      if (leader && leader !== cluster.nodes[0].nodeId) {
        room = `room${i}`;
        leaderId = leader;
      }
    }
    const created = await call(first, 'POST', '/api/v1/waiting-rooms', token, { room_id: room, capacity: 20, admission_rate: { batch_size: 1, interval_seconds: 2 } });
    expect(created.status).toBeLessThan(300);
    for (const member_id of ['m1', 'm2', 'm3', 'm4', 'm5', 'm6']) {
      expect((await call(first, 'POST', `/api/v1/waiting-rooms/${room}/join`, token, { member_id })).status).toBe(200);
    }
    // Kill the room's leader before the first tick has admitted everyone.
    await cluster.nodes.find((n) => n.nodeId === leaderId)!.kill('SIGKILL');
    const admittedBefore = (await call(first, 'GET', `/api/v1/waiting-rooms/${room}/members?status=active`, token)).body.members?.length ?? 0;
    // Ticks go on, now fired by the new leader from the replicated alarm.
    const deadline = Date.now() + 20_000;
    let admitted = admittedBefore;
    while (Date.now() < deadline && admitted < admittedBefore + 2) {
      const active = await call(first, 'GET', `/api/v1/waiting-rooms/${room}/members?status=active`, token);
      if (active.status === 200) admitted = active.body.members.length;
      await sleep(250);
    }
    expect(admitted).toBeGreaterThanOrEqual(admittedBefore + 2);
  }, 60_000);
});
