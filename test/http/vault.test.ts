import { createHash, generateKeyPairSync, sign, createDecipheriv } from 'node:crypto';
import { combine } from 'shamir-secret-sharing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../runtime/index.js';
import { startTestNode, type TestNode, expectError } from '../helpers/node.js';
import { settle } from '../helpers/runtime.js';
import { historyLines, wonLotteryHistory } from '../helpers/vault.js';

/** Vault attestations over the real socket (spec doc 2 §4.1; docs/api/vault.md). */
let t: TestNode;
type User = Awaited<ReturnType<TestNode['newUser']>>;
let alice: User;
let bob: User;
const base = '/api/v1/vault/attestations';

beforeAll(async () => {
  t = await startTestNode({ clock: 'manual', config: { accessTokenTtlSeconds: 86_400 } });
  [alice, bob] = await Promise.all([t.newUser('alice'), t.newUser('bob')]);
});
afterAll(async () => {
  await t?.destroy();
});

const clock = () => t.clock as ManualClock;
const inSeconds = (s: number) => new Date(clock().now() + s * 1000).toISOString();
async function create(body: Record<string, unknown>, token = alice.token) {
  const res = await t.request('POST', base, { token, body: { content: { data: 'the secret', type: 'text/plain' }, ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body;
}
async function until<T>(check: () => Promise<T | undefined | false>, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await check();
    if (value) return value;
    clock().advance(0);
    await settle(2);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}
function keypair() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return { public_key: (publicKey.export({ format: 'der', type: 'spki' }) as Buffer).subarray(12).toString('base64'), privateKey };
}
/** The offline recipe of docs/api/vault.md: open sealed_content with the key (nonce 12 | ciphertext | tag 16, AAD = attestation id). */
function openOffline(key: Buffer, sealed: string, id: string): string {
  const raw = Buffer.from(sealed, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  decipher.setAAD(Buffer.from(id));
  decipher.setAuthTag(raw.subarray(raw.length - 16));
  return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString('utf8');
}

describe('time lock', () => {
  it('creates with proof and shares, refuses to reveal early, and unlocks by its alarm with no request', async () => {
    const unlock_at = inSeconds(3600);
    const created = await create({ content: { data: 'launch code 0000', type: 'text/plain' }, lock_config: { type: 'time_lock', unlock_at } });
    expect(created).toMatchObject({ status: 'locked', share_threshold: 2, content_hash: createHash('sha256').update('launch code 0000').digest('hex') });
    expect(created.holder_shares).toHaveLength(3);
    expect(created.lock_proof.leaves.map((l: { label: string }) => l.label)).toContain('key_commitment');
    expect(created.unlock_scheduled).toBe(unlock_at);

    const early = await t.request('POST', `${base}/${created.attestation_id}/unlock`, { token: alice.token });
    expectError(early, 409, 'attestation_locked');
    expect(early.body.details[0]).toMatchObject({ status: 'locked', time_reached: false });

    const status = await t.request('GET', `${base}/${created.attestation_id}/status`, { token: alice.token });
    expect(status.body).toMatchObject({ status: 'locked', lock_type: 'time_lock', owner: alice.user_id, time_remaining_seconds: 3600, lottery_status: null });

    clock().advance(3600 * 1000);
    // No request: the alarm moves it, and the list (fed by the attestation) shows it.
    const listed = await until(async () => {
      const res = await t.request('GET', `${base}?status=unlocked`, { token: alice.token });
      return res.body.attestations.find((a: { attestation_id: string }) => a.attestation_id === created.attestation_id);
    }, 'the alarm to unlock');
    expect(listed).toMatchObject({ lock_type: 'time_lock', status: 'unlocked' });
    const history = await t.request('GET', `${base}/${created.attestation_id}/history`, { token: alice.token });
    expect(historyLines(history.body)).toEqual([`created:${alice.user_id}`, 'time_reached:system', 'unlocked:system']);

    const open = await t.request('POST', `${base}/${created.attestation_id}/unlock`, { token: alice.token });
    expect(open.status, open.text).toBe(200);
    expect(open.body).toMatchObject({ status: 'unlocked', unlock_method: 'time_lock', revealed: { data: 'launch code 0000', type: 'text/plain' } });
    // Anyone can check the reveal against what was published at creation.
    const key = Buffer.from(open.body.unlock_proof.content_key, 'base64');
    expect(open.body.unlock_proof.merkle_root).toBe(created.lock_proof.merkle_root);
    expect(openOffline(key, created.sealed_content, created.attestation_id)).toBe('launch code 0000');
  });

  it('holders rebuild the key off-line from share_threshold shares, not from fewer', async () => {
    const created = await create({ lock_config: { type: 'time_lock', unlock_at: inSeconds(86_400) }, share_count: 4, share_threshold: 3 });
    const shares = created.holder_shares.map((s: string) => new Uint8Array(Buffer.from(s, 'base64')));
    const key = Buffer.from(await combine([shares[3], shares[0], shares[2]]));
    expect(openOffline(key, created.sealed_content, created.attestation_id)).toBe('the secret');
    const wrong = Buffer.from(await combine([shares[0], shares[1]]));
    expect(() => openOffline(wrong, created.sealed_content, created.attestation_id)).toThrow();
  });
});

describe('witness lock', () => {
  it('collects valid signatures up to the threshold, refusing bad ones, then reveals', async () => {
    const w1 = keypair();
    const w2 = keypair();
    const created = await create({ lock_config: { type: 'witness', witnesses: { signers: [{ signer: 'w1', public_key: w1.public_key }, { signer: 'w2', public_key: w2.public_key }], threshold: 2 } } });
    const message = Buffer.from(created.witness_message);
    const sig = (who: ReturnType<typeof keypair>) => sign(null, message, who.privateKey).toString('base64');

    const bad = await t.request('POST', `${base}/${created.attestation_id}/witness`, { token: bob.token, body: { signer: 'w1', signature: sig(w2) } });
    expectError(bad, 400, 'invalid_signature');
    expect(bad.body.details[0]).toMatchObject({ signature_valid: false });
    expectError(await t.request('POST', `${base}/${created.attestation_id}/witness`, { token: bob.token, body: { signer: 'nobody', signature: sig(w1) } }), 400, 'BAD_REQUEST');

    // Witnesses may be other users: the signature is the credential.
    const first = await t.request('POST', `${base}/${created.attestation_id}/witness`, { token: bob.token, body: { signer: 'w1', signature: sig(w1) } });
    expect(first.status, first.text).toBe(200);
    expect(first.body).toMatchObject({ current: 1, required: 2, signature_valid: true, witness: 'w1', status: 'partially_unlocked' });
    expectError(await t.request('POST', `${base}/${created.attestation_id}/unlock`, { token: alice.token }), 409, 'attestation_locked');
    const second = await t.request('POST', `${base}/${created.attestation_id}/witness`, { token: alice.token, body: { signer: 'w2', signature: sig(w2) } });
    expect(second.body).toMatchObject({ current: 2, status: 'unlocked' });

    const status = await t.request('GET', `${base}/${created.attestation_id}/status`, { token: alice.token });
    expect(status.body.unlock_progress).toMatchObject({ signatures_collected: 2, signatures_required: 2 });
    expect(status.body.unlock_progress.signers.map((s: { signer: string }) => s.signer)).toEqual(['w1', 'w2']);
    const open = await t.request('POST', `${base}/${created.attestation_id}/unlock`, { token: alice.token });
    expect(open.body).toMatchObject({ unlock_method: 'witness', signatures_collected: 2, revealed: { data: 'the secret' } });
    expect(open.body.unlock_proof.signatures).toHaveLength(2);
    // Bob submitted a signature but is not of the tenant: the content is not his to read.
    expectError(await t.request('POST', `${base}/${created.attestation_id}/unlock`, { token: bob.token }), 404, 'not_found');
  });
});

describe('lottery lock', () => {
  it('entries raise the probability until one wins; the winner gets the key; the seed proves the draw', async () => {
    const created = await create({ lock_config: { type: 'lottery', lottery: { odds_per_entry: 0.2, max_entries: 10_000 } } });
    const commitment = created.lock_proof.leaves.find((l: { label: string }) => l.label === 'lottery_commitment').value;
    let total = 0;
    let winning: { body: any } | null = null;
    for (let i = 0; i < 200 && !winning; i++) {
      const res = await t.request('POST', `${base}/${created.attestation_id}/lottery/enter`, { token: bob.token, body: { entry_count: 1 } });
      expect(res.status, res.text).toBe(200);
      total += res.body.entries_purchased;
      expect(res.body.total_entries).toBe(total);
      if (res.body.revealed) winning = res;
      else expect(res.body).toMatchObject({ content_key: null, won: false });
    }
    expect(winning).not.toBeNull();
    expect(winning!.body).toMatchObject({ status: 'unlocked', current_probability: 1, won: true, revealed: true });
    const key = Buffer.from(winning!.body.content_key, 'base64');
    expect(openOffline(key, created.sealed_content, created.attestation_id)).toBe('the secret');
    expectError(await t.request('POST', `${base}/${created.attestation_id}/lottery/enter`, { token: bob.token, body: { entry_count: 1 } }), 409, 'lottery_closed');

    const open = await t.request('POST', `${base}/${created.attestation_id}/unlock`, { token: bob.token });
    expect(open.status, open.text).toBe(200);
    const seed = Buffer.from(open.body.unlock_proof.lottery_seed, 'base64');
    expect(createHash('sha256').update(Buffer.concat([Buffer.from('vault-lottery-seed/v1'), Buffer.from([0]), seed])).digest('hex')).toBe(commitment);
    expect(open.body.unlock_proof.lottery_winning_entry).toBe(total - 1);
  });
});

describe('combined locks', () => {
  it('a lottery win before unlock_at reveals nothing (no key, no content): the alarm opens it, then the winner (another tenant) reads it', async () => {
    const created = await create({ content: { data: 'sealed until next month', type: 'text/plain' }, lock_config: { type: 'lottery', unlock_at: inSeconds(3600), lottery: { odds_per_entry: 1 } } });
    const id = created.attestation_id;
    const entered = await t.request('POST', `${base}/${id}/lottery/enter`, { token: bob.token, body: { entry_count: 1 } });
    expect(entered.status, entered.text).toBe(200);
    expect(entered.body).toEqual({ attestation_id: id, content_key: null, current_probability: 1, entries_purchased: 1, revealed: false, won: true, status: 'partially_unlocked', total_entries: 1 });
    const early = await t.request('POST', `${base}/${id}/unlock`, { token: bob.token });
    expectError(early, 409, 'attestation_locked');
    expect(early.body.details[0]).toMatchObject({ time_reached: false, lottery_won: true, status: 'partially_unlocked' });
    const status = await t.request('GET', `${base}/${id}/status`, { token: bob.token });
    expect(status.body).toMatchObject({ status: 'partially_unlocked', time_remaining_seconds: 3600, unlocked_at: null, lottery_status: { won: true } });

    // (An hour, not the tester's 30 days: the tokens of this file live a day.)
    clock().advance(3600 * 1000);
    await until(async () => {
      const res = await t.request('GET', `${base}/${id}/status`, { token: bob.token });
      return res.body.status === 'unlocked';
    }, 'the alarm to unlock');
    const open = await t.request('POST', `${base}/${id}/unlock`, { token: bob.token });
    expect(open.status, open.text).toBe(200);
    expect(open.body).toMatchObject({ unlock_method: 'combined:time_lock+lottery', revealed: { data: 'sealed until next month' }, unlock_proof: { lottery_winning_entry: 0 } });
    expect(openOffline(Buffer.from(open.body.unlock_proof.content_key, 'base64'), created.sealed_content, id)).toBe('sealed until next month');
    const history = await t.request('GET', `${base}/${id}/history`, { token: bob.token });
    expect(historyLines(history.body)).toEqual(wonLotteryHistory(alice.user_id, bob.user_id));
  });

  it('signatures sent together each report the count as of their own turn', async () => {
    const keys = [keypair(), keypair(), keypair()];
    const signers = keys.map((key, i) => ({ signer: `w${i + 1}`, public_key: key.public_key }));
    const created = await create({ lock_config: { type: 'witness', witnesses: { signers, threshold: 2 } } });
    const sig = (i: number) => sign(null, Buffer.from(created.witness_message), keys[i].privateKey).toString('base64');
    const witness = (i: number) => t.request('POST', `${base}/${created.attestation_id}/witness`, { token: alice.token, body: { signer: `w${i + 1}`, signature: sig(i) } });
    expect((await witness(0)).body).toMatchObject({ current: 1, required: 2, status: 'partially_unlocked' });
    const [w2, w3] = await Promise.all([witness(1), witness(2)]);
    const byCount = [w2.body, w3.body].sort((a, b) => a.current - b.current);
    expect(byCount.map((body) => [body.current, body.status])).toEqual([
      [2, 'unlocked'],
      [3, 'unlocked'],
    ]);
    // The turn order is the order the history records.
    const history = await t.request('GET', `${base}/${created.attestation_id}/history`, { token: alice.token });
    const order = history.body.events.filter((e: { event_type: string }) => e.event_type === 'witnessed').map((e: { actor: string }) => e.actor);
    expect(byCount.map((body) => body.witness)).toEqual(order.slice(1));
  });
});

describe('bad input and tenancy', () => {
  it('refuses unknown lock types, missing conditions, past times, bad keys, oversize content', async () => {
    const post = (body: Record<string, unknown>) => t.request('POST', base, { token: alice.token, body: { content: { data: 'x', type: 'text/plain' }, ...body } });
    expectError(await post({ lock_config: { type: 'quantum_lock' } }), 400, 'BAD_REQUEST');
    expectError(await post({ lock_config: { type: 'time_lock' } }), 400, 'BAD_REQUEST');
    expectError(await post({ lock_config: { type: 'time_lock', unlock_at: inSeconds(-10) } }), 400, 'BAD_REQUEST');
    expectError(await post({ lock_config: { type: 'witness', witnesses: { signers: [{ signer: 'a', public_key: 'A'.repeat(43) + '=' }], threshold: 2 } } }), 400, 'BAD_REQUEST');
    expectError(await post({ lock_config: { type: 'witness', witnesses: { signers: [{ signer: 'a', public_key: 'not a key' }] } } }), 400, 'BAD_REQUEST');
    expectError(await post({ lock_config: { type: 'lottery', lottery: { odds_per_entry: 0 } } }), 400, 'BAD_REQUEST');
    expectError(await post({ lock_config: { type: 'time_lock', unlock_at: inSeconds(10) }, share_count: 2, share_threshold: 3 }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { token: alice.token, body: { content: { data: 'x'.repeat(70_000), type: 't' }, lock_config: { type: 'time_lock', unlock_at: inSeconds(10) } } }), 400, 'BAD_REQUEST');
    expectError(await t.request('POST', base, { body: { content: { data: 'x', type: 't' }, lock_config: { type: 'time_lock', unlock_at: inSeconds(10) } } }), 401, 'unauthorized');
  });

  it('another tenant sees nothing; the list is per tenant with pages', async () => {
    const created = await create({ lock_config: { type: 'time_lock', unlock_at: inSeconds(50) } });
    expectError(await t.request('GET', `${base}/${created.attestation_id}/status`, { token: bob.token }), 404, 'not_found');
    expectError(await t.request('GET', `${base}/${created.attestation_id}/history`, { token: bob.token }), 404, 'not_found');
    expectError(await t.request('GET', `${base}/att_unknown/status`, { token: alice.token }), 404, 'not_found');
    const bobs = await t.request('GET', base, { token: bob.token });
    expect(bobs.body.attestations.find((a: { attestation_id: string }) => a.attestation_id === created.attestation_id)).toBeUndefined();
    const page = await until(async () => {
      const res = await t.request('GET', `${base}?page_size=1&page=1`, { token: alice.token });
      return res.body.total >= 5 && res.body;
    }, 'the index');
    expect(page).toMatchObject({ page: 1, page_size: 1 });
    expect(page.attestations).toHaveLength(1);
    expectError(await t.request('GET', `${base}?status=open`, { token: alice.token }), 400, 'BAD_REQUEST');
  });
});
