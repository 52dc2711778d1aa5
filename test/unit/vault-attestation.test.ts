import { generateKeyPairSync, sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadAttestation, stepAttestation, UNLOCK_ALARM, type AttestationState } from '../../actors/vault/attestation-state.js';
import { loadAttestationIndex, stepAttestationIndex } from '../../actors/vault/index-state.js';
import { buildLockProof, witnessMessage, type AttestationCaller, type AttestationMessage, type AttestationRecord, type EnterReply, type LockConfig, type WitnessReply } from '../../actors/vault/messages.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** The attestation's lock as a state machine: locked -> partially_unlocked -> unlocked (docs/api/vault.md). */
const owner: AttestationCaller = { user_id: 'u1', tenant: 't1', admin: false };
const stranger: AttestationCaller = { user_id: 'u9', tenant: 't9', admin: false };
const T0 = 1_000_000;

function keypair() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return { public_key: (publicKey.export({ format: 'der', type: 'spki' }) as Buffer).subarray(12).toString('base64'), privateKey };
}

function created(lock: Partial<LockConfig>, extra: Partial<AttestationRecord> = {}): AttestationState {
  const state = loadAttestation('att_1', []);
  const record = {
    attestation_id: 'att_1', tenant: 't1', owner: 'u1', content_type: 'text/plain', content_hash: 'ch', key_commitment: 'kc',
    share_threshold: 2, share_count: 3,
    lock: { type: 'time_lock', unlock_at_ms: null, witnesses: null, lottery: null, ...lock } as LockConfig,
    lock_proof: buildLockProof([{ label: 'attestation_id', value: 'att_1' }]),
    sealed: { sealed_content: 'c', sealed_key: 'k', sealed_lottery_seed: null },
    lottery_commitment: null, lottery_winning_entry: null, created_at_ms: T0, ...extra,
  };
  const result = stepAttestation(state, { op: 'create', record }, fixedContext(T0));
  if (record.lock.unlock_at_ms !== null) expect(result.alarms).toEqual([{ name: UNLOCK_ALARM, due_ms: record.lock.unlock_at_ms }]);
  return state;
}
const step = (state: AttestationState, message: AttestationMessage, now = T0) => stepAttestation(state, message, fixedContext(now));

describe('time lock', () => {
  it('refuses to unlock before unlock_at, and its alarm unlocks it with no request', () => {
    const state = created({ unlock_at_ms: T0 + 60_000 });
    expect(state.record!.status).toBe('locked');
    expect(codeOf(() => step(state, { op: 'unlock', caller: owner }, T0 + 59_999))).toBe('attestation_locked');
    const fired = stepAttestation(state, { op: '$alarm', name: UNLOCK_ALARM, due_ms: T0 + 60_000 }, fixedContext(T0 + 60_000));
    expect(state.record).toMatchObject({ status: 'unlocked', unlocked_at_ms: T0 + 60_000, unlock_method: 'time_lock' });
    expect(fired.sends).toHaveLength(1);
    expect(state.events.map((e) => [e.event_type, e.actor])).toEqual([['created', 'u1'], ['time_reached', 'system'], ['unlocked', 'system']]);
    step(state, { op: 'unlock', caller: owner }, T0 + 61_000);
    expect(state.events.at(-1)).toMatchObject({ event_type: 'content_revealed', actor: 'u1' });
  });

  it('is invisible to another tenant', () => {
    const state = created({ unlock_at_ms: T0 + 1 });
    expect(codeOf(() => step(state, { op: 'status', caller: stranger }))).toBe('not_found');
    expect(codeOf(() => step(state, { op: 'unlock', caller: stranger }, T0 + 10))).toBe('not_found');
    expect(codeOf(() => step(state, { op: 'status', caller: { ...stranger, admin: true } }))).toBeUndefined();
  });
});

describe('witness lock', () => {
  const alice = keypair();
  const bob = keypair();
  const carol = keypair();
  const signers = [
    { signer: 'alice', public_key: alice.public_key },
    { signer: 'bob', public_key: bob.public_key },
    { signer: 'carol', public_key: carol.public_key },
  ];
  const signature = (who: ReturnType<typeof keypair>, state: AttestationState) =>
    sign(null, Buffer.from(witnessMessage('att_1', state.record!.content_hash, state.record!.lock_proof.merkle_root)), who.privateKey).toString('base64');

  it('goes locked -> partially_unlocked -> unlocked at the threshold; a signer counts once', () => {
    const state = created({ type: 'witness', witnesses: { signers, threshold: 2 } });
    step(state, { op: 'witness', caller: stranger, signer: 'alice', signature: signature(alice, state) });
    expect(state.record!.status).toBe('partially_unlocked');
    step(state, { op: 'witness', caller: owner, signer: 'alice', signature: signature(alice, state) });
    expect(state.record!.witnesses).toHaveLength(1);
    expect(codeOf(() => step(state, { op: 'unlock', caller: owner }))).toBe('attestation_locked');
    step(state, { op: 'witness', caller: owner, signer: 'carol', signature: signature(carol, state) }, T0 + 5);
    expect(state.record).toMatchObject({ status: 'unlocked', unlocked_at_ms: T0 + 5, unlock_method: 'witness' });
  });

  it('each reply counts as of its own turn, though the record moves on in the same batch', () => {
    const state = created({ type: 'witness', witnesses: { signers, threshold: 2 } });
    const first = step(state, { op: 'witness', caller: owner, signer: 'alice', signature: signature(alice, state) }).reply as WitnessReply;
    // Bob and Carol in one batch: both replies are released after the batch's commit.
    const second = step(state, { op: 'witness', caller: owner, signer: 'bob', signature: signature(bob, state) }).reply as WitnessReply;
    const third = step(state, { op: 'witness', caller: owner, signer: 'carol', signature: signature(carol, state) }).reply as WitnessReply;
    const again = step(state, { op: 'witness', caller: owner, signer: 'alice', signature: signature(alice, state) }).reply as WitnessReply;
    expect([first, second, third, again].map((r) => [r.signatures_collected, r.status])).toEqual([
      [1, 'partially_unlocked'],
      [2, 'unlocked'],
      [3, 'unlocked'],
      [3, 'unlocked'],
    ]);
    expect(again.witnessed_at_ms).toBe(first.witnessed_at_ms);
  });

  it('refuses bad signatures and unknown signers, recording nothing', () => {
    const state = created({ type: 'witness', witnesses: { signers, threshold: 2 } });
    const events = state.events.length;
    expect(codeOf(() => step(state, { op: 'witness', caller: owner, signer: 'alice', signature: signature(bob, state) }))).toBe('invalid_signature');
    expect(codeOf(() => step(state, { op: 'witness', caller: owner, signer: 'mallory', signature: signature(bob, state) }))).toBe('BAD_REQUEST');
    expect(state.record!.witnesses).toEqual([]);
    expect(state.events).toHaveLength(events);
  });

  it('with unlock_at too, both must hold: partially unlocked until the time comes', () => {
    const state = created({ type: 'witness', unlock_at_ms: T0 + 1_000, witnesses: { signers, threshold: 1 } });
    step(state, { op: 'witness', caller: owner, signer: 'bob', signature: signature(bob, state) });
    expect(state.record!.status).toBe('partially_unlocked');
    stepAttestation(state, { op: '$alarm', name: UNLOCK_ALARM, due_ms: T0 + 1_000 }, fixedContext(T0 + 1_000));
    expect(state.record).toMatchObject({ status: 'unlocked', unlock_method: 'combined:time_lock+witness' });
  });
});

describe('lottery lock', () => {
  it('the entry bought at the winning index wins; nobody buys past it; then closed', () => {
    const state = created({ type: 'lottery', lottery: { odds_per_entry: 0.01, max_entries: 1000 } }, { lottery_winning_entry: 7 });
    const first = step(state, { op: 'enter', caller: stranger, entry_count: 5 }).reply as EnterReply;
    expect(first).toMatchObject({ entries_purchased: 5, won: false });
    expect(state.record!.status).toBe('locked');
    const second = step(state, { op: 'enter', caller: { ...stranger, user_id: 'u8' }, entry_count: 10 }).reply as EnterReply;
    expect(second).toMatchObject({ entries_purchased: 3, won: true, revealed: true, total_entries: 8, status: 'unlocked' });
    expect(state.record).toMatchObject({ lottery_total_entries: 8, lottery_winner: 'u8', status: 'unlocked' });
    expect(state.events.slice(-4).map((e) => e.event_type)).toEqual(['lottery_entered', 'lottery_won', 'unlocked', 'content_revealed']);
    expect(codeOf(() => step(state, { op: 'enter', caller: stranger, entry_count: 1 }))).toBe('lottery_closed');
    // The winner, from another tenant, may read it.
    expect(codeOf(() => step(state, { op: 'unlock', caller: { ...stranger, user_id: 'u8' } }))).toBeUndefined();
  });

  it('with unlock_at too, a win reveals nothing before the time: the alarm opens it, once, and the winner reads it then', () => {
    const winner = { ...stranger, user_id: 'u8' };
    const state = created({ type: 'lottery', unlock_at_ms: T0 + 60_000, lottery: { odds_per_entry: 1, max_entries: 10 } }, { lottery_winning_entry: 0 });
    const entered = step(state, { op: 'enter', caller: winner, entry_count: 1 }).reply as EnterReply;
    expect(entered).toMatchObject({ entries_purchased: 1, won: true, revealed: false, total_entries: 1, status: 'partially_unlocked' });
    expect(state.record).toMatchObject({ lottery_winner: 'u8', status: 'partially_unlocked', unlocked_at_ms: null, unlock_method: null });
    expect(state.events.map((e) => e.event_type)).toEqual(['created', 'lottery_entered', 'lottery_won']);
    // The winner may read the status, not the content, until the time has come.
    expect(codeOf(() => step(state, { op: 'status', caller: winner }))).toBeUndefined();
    expect(codeOf(() => step(state, { op: 'unlock', caller: winner }, T0 + 59_999))).toBe('attestation_locked');
    expect(codeOf(() => step(state, { op: 'unlock', caller: owner }, T0 + 59_999))).toBe('attestation_locked');
    expect(codeOf(() => step(state, { op: 'enter', caller: owner, entry_count: 1 }))).toBe('lottery_closed');

    const alarm = { op: '$alarm', name: UNLOCK_ALARM, due_ms: T0 + 60_000 } as const;
    const fired = stepAttestation(state, alarm, fixedContext(T0 + 60_000));
    expect(fired.sends).toHaveLength(1);
    expect(state.record).toMatchObject({ status: 'unlocked', unlocked_at_ms: T0 + 60_000, unlock_method: 'combined:time_lock+lottery' });
    // At-least-once alarms: a second delivery (or a reload and a re-armed alarm) opens nothing again.
    const reloaded = loadAttestation('att_1', [['a', structuredClone(state.record)]]);
    stepAttestation(reloaded, alarm, fixedContext(T0 + 60_001));
    expect(reloaded.record).toMatchObject({ unlocked_at_ms: T0 + 60_000, unlock_method: 'combined:time_lock+lottery' });
    expect(reloaded.events.filter((e) => e.event_type === 'unlocked')).toHaveLength(0);
    expect(state.events.filter((e) => e.event_type === 'unlocked')).toEqual([expect.objectContaining({ actor: 'system' })]);
    step(state, { op: 'unlock', caller: winner }, T0 + 61_000);
    expect(state.events.at(-1)).toMatchObject({ event_type: 'content_revealed', actor: 'u8' });
  });

  it('a win that completes the lock reveals in the same turn: the time had come (alarm not yet run), or the signatures were in', () => {
    const late = created({ type: 'lottery', unlock_at_ms: T0 + 10, lottery: { odds_per_entry: 1, max_entries: 10 } }, { lottery_winning_entry: 0 });
    expect(step(late, { op: 'enter', caller: stranger, entry_count: 1 }, T0 + 10).reply).toMatchObject({ won: true, revealed: true, status: 'unlocked' });
    expect(late.record!.unlock_method).toBe('combined:time_lock+lottery');
    // The alarm comes afterwards: the time is recorded, the attestation is not unlocked twice.
    stepAttestation(late, { op: '$alarm', name: UNLOCK_ALARM, due_ms: T0 + 10 }, fixedContext(T0 + 11));
    expect(late.events.map((e) => e.event_type)).toEqual(['created', 'lottery_entered', 'lottery_won', 'unlocked', 'content_revealed', 'time_reached']);

    const signer = keypair();
    const both = created({ type: 'lottery', witnesses: { signers: [{ signer: 'w', public_key: signer.public_key }], threshold: 1 }, lottery: { odds_per_entry: 1, max_entries: 10 } }, { lottery_winning_entry: 0 });
    expect(step(both, { op: 'enter', caller: stranger, entry_count: 1 }).reply).toMatchObject({ won: true, revealed: false, status: 'partially_unlocked' });
    const signature = sign(null, Buffer.from(witnessMessage('att_1', 'ch', both.record!.lock_proof.merkle_root)), signer.privateKey).toString('base64');
    step(both, { op: 'witness', caller: owner, signer: 'w', signature });
    expect(both.record).toMatchObject({ status: 'unlocked', unlock_method: 'combined:witness+lottery' });
    expect(both.events.filter((e) => e.event_type === 'unlocked')).toEqual([expect.objectContaining({ actor: 'w' })]);
  });

  it('sells at most max_entries, and entering a lock without a lottery is refused', () => {
    const state = created({ type: 'lottery', lottery: { odds_per_entry: 0.5, max_entries: 4 } }, { lottery_winning_entry: null });
    expect((step(state, { op: 'enter', caller: owner, entry_count: 10 }).reply as EnterReply).entries_purchased).toBe(4);
    expect(codeOf(() => step(state, { op: 'enter', caller: owner, entry_count: 1 }))).toBe('lottery_closed');
    const timed = created({ unlock_at_ms: T0 + 5 });
    expect(codeOf(() => step(timed, { op: 'enter', caller: owner, entry_count: 1 }))).toBe('invalid_configuration');
  });
});

describe('attestation index', () => {
  it('lists newest first with a status filter; a status never moves back', () => {
    const index = loadAttestationIndex('t', []);
    const entry = (id: string, created: number, status: 'locked' | 'unlocked') => ({ attestation_id: id, owner: 'u', content_type: 'x', lock_type: 'time_lock' as const, status, created_at_ms: created, unlock_at_ms: null });
    stepAttestationIndex(index, { op: 'upsert', entry: entry('a', 1, 'locked') }, fixedContext(1));
    stepAttestationIndex(index, { op: 'upsert', entry: entry('b', 2, 'unlocked') }, fixedContext(1));
    stepAttestationIndex(index, { op: 'upsert', entry: entry('b', 2, 'locked') }, fixedContext(1));
    const all = stepAttestationIndex(index, { op: 'list', page: 1, page_size: 10 }, fixedContext(1)).reply as { attestations: { attestation_id: string; status: string }[] };
    expect(all.attestations.map((a) => [a.attestation_id, a.status])).toEqual([['b', 'unlocked'], ['a', 'locked']]);
    const locked = stepAttestationIndex(index, { op: 'list', status: 'locked', page: 1, page_size: 10 }, fixedContext(1)).reply as { total: number };
    expect(locked.total).toBe(1);
  });
});
