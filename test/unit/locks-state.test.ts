import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ServiceError, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { lockActorKey, type LockMessage, type LockView } from '../../actors/locks/messages.js';
import {
  currentHolder,
  initialLockState,
  stepLock,
  type LockState,
} from '../../actors/locks/state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** Pure step tests of the lock: a fixed context, no runtime, no disk, no clock. */
const T0 = Date.UTC(2026, 0, 1);

const contextAt = (now: number): TurnContext => fixedContext(now, 'lock', lockActorKey('t', 'ns', 'k'));

function step(state: LockState, message: LockMessage | { op: '$alarm'; name: string; due_ms: number }, now: number): TurnResult<LockState, LockView> {
  return stepLock(state, message, contextAt(now));
}

describe('lock step', () => {
  it('acquires a free lock with fence token 1 and the metadata, writing only its record (no alarm, no message)', () => {
    const result = step(initialLockState(), { op: 'acquire', owner_id: 'a', ttl_seconds: 30, metadata: { job: 7 } }, T0);
    const holder = result.state.holder!;
    expect(holder).toMatchObject({ owner_id: 'a', fence_token: 1, acquired_at_ms: T0, expires_at_ms: T0 + 30_000, ttl_seconds: 30, metadata: { job: 7 } });
    expect(holder.lock_id).toMatch(/^lck_/);
    expect(result.state.last_fence_token).toBe(1);
    expect(result.reply).toEqual({ holder, last_fence_token: 1, now_ms: T0 });
    expect(result.alarms).toBeUndefined();
    expect(result.sends).toBeUndefined();
  });

  it('stores null metadata when none is given', () => {
    const result = step(initialLockState(), { op: 'acquire', owner_id: 'a', ttl_seconds: 5 }, T0);
    expect(result.state.holder!.metadata).toBeNull();
  });

  it('refuses another owner with lock_held, without changing the state', () => {
    const held = step(initialLockState(), { op: 'acquire', owner_id: 'a', ttl_seconds: 30 }, T0).state;
    const frozen = structuredClone(held);
    expect(codeOf(() => step(held, { op: 'acquire', owner_id: 'b', ttl_seconds: 30 }, T0 + 1000))).toBe('lock_held');
    expect(held).toEqual(frozen);
  });

  it('re-acquiring by the holder returns the same lock unchanged (no new token, no write)', () => {
    const held = step(initialLockState(), { op: 'acquire', owner_id: 'a', ttl_seconds: 30 }, T0).state;
    const again = step(held, { op: 'acquire', owner_id: 'a', ttl_seconds: 60, metadata: 'other' }, T0 + 5000);
    expect(again.state).toBe(held);
    expect(again.reply!.holder).toEqual(held.holder);
    expect(again.alarms).toBeUndefined();
  });

  it('extends: new expiry from now, default ttl is the acquired one', () => {
    const held = step(initialLockState(), { op: 'acquire', owner_id: 'a', ttl_seconds: 30 }, T0).state;
    const { lock_id } = held.holder!;
    const extended = step(held, { op: 'extend', lock_id, owner_id: 'a' }, T0 + 20_000);
    expect(extended.state.holder).toMatchObject({ lock_id, fence_token: 1, expires_at_ms: T0 + 50_000, ttl_seconds: 30, acquired_at_ms: T0 });
    expect(extended.alarms).toBeUndefined();
    const longer = step(extended.state, { op: 'extend', lock_id, owner_id: 'a', ttl_seconds: 120 }, T0 + 21_000);
    expect(longer.state.holder).toMatchObject({ expires_at_ms: T0 + 141_000, ttl_seconds: 120 });
    expect(held.holder!.expires_at_ms).toBe(T0 + 30_000); // snapshot state is never mutated
  });

  it('extend and release by a wrong lock_id or owner_id, or after expiry, are lock_not_held', () => {
    const held = step(initialLockState(), { op: 'acquire', owner_id: 'a', ttl_seconds: 30 }, T0).state;
    const { lock_id } = held.holder!;
    for (const op of ['extend', 'release'] as const) {
      expect(codeOf(() => step(held, { op, lock_id, owner_id: 'b' }, T0 + 1))).toBe('lock_not_held');
      expect(codeOf(() => step(held, { op, lock_id: 'lck_other', owner_id: 'a' }, T0 + 1))).toBe('lock_not_held');
      expect(codeOf(() => step(held, { op, lock_id, owner_id: 'a' }, T0 + 30_000))).toBe('lock_not_held');
      expect(codeOf(() => step(initialLockState(), { op, lock_id, owner_id: 'a' }, T0))).toBe('lock_not_held');
    }
  });

  it('releases: holder gone, fence counter kept', () => {
    const held = step(initialLockState(), { op: 'acquire', owner_id: 'a', ttl_seconds: 30 }, T0).state;
    const released = step(held, { op: 'release', lock_id: held.holder!.lock_id, owner_id: 'a' }, T0 + 1);
    expect(released.state).toEqual({ holder: null, last_fence_token: 1 });
    expect(released.alarms).toBeUndefined();
  });

  it('status is correct before the expiry alarm fires', () => {
    const held = step(initialLockState(), { op: 'acquire', owner_id: 'a', ttl_seconds: 10 }, T0).state;
    expect(step(held, { op: 'status' }, T0 + 9_999).reply!.holder).toEqual(held.holder);
    const after = step(held, { op: 'status' }, T0 + 10_000);
    expect(after.reply).toEqual({ holder: null, last_fence_token: 1, now_ms: T0 + 10_000 });
    expect(after.state).toBe(held); // a read never writes
    expect(currentHolder(held, T0 + 10_000)).toBeNull();
  });

  it('a new owner acquires an expired lock before the alarm fired, with the next token', () => {
    const held = step(initialLockState(), { op: 'acquire', owner_id: 'a', ttl_seconds: 10 }, T0).state;
    const next = step(held, { op: 'acquire', owner_id: 'b', ttl_seconds: 10 }, T0 + 10_000);
    expect(next.state.holder).toMatchObject({ owner_id: 'b', fence_token: 2 });
    expect(next.state.holder!.lock_id).not.toBe(held.holder!.lock_id);
    // The old holder expired, so acquiring as the old owner also gives a new lock.
    const same = step(held, { op: 'acquire', owner_id: 'a', ttl_seconds: 10 }, T0 + 10_000);
    expect(same.state.holder).toMatchObject({ owner_id: 'a', fence_token: 2 });
  });

  it('an expiry alarm stored by an earlier version drops an expired holder and keeps the counter; a stale alarm changes nothing', () => {
    const held = step(initialLockState(), { op: 'acquire', owner_id: 'a', ttl_seconds: 10 }, T0).state;
    const early = step(held, { op: '$alarm', name: 'expiry', due_ms: T0 + 5_000 }, T0 + 5_000);
    expect(early.state).toBe(held);
    const fired = step(held, { op: '$alarm', name: 'expiry', due_ms: T0 + 10_000 }, T0 + 10_000);
    expect(fired.state).toEqual({ holder: null, last_fence_token: 1 });
    const onFree = step(fired.state, { op: '$alarm', name: 'expiry', due_ms: T0 + 10_000 }, T0 + 20_000);
    expect(onFree.state).toBe(fired.state);
  });

  it('property: fence tokens strictly increase over any sequence of operations and times', () => {
    const owners = ['a', 'b', 'c'];
    const operation = fc.record({
      kind: fc.constantFrom('acquire', 'extend', 'release', 'status', 'alarm', 'extend-wrong', 'release-wrong'),
      owner: fc.constantFrom(...owners),
      ttl_seconds: fc.integer({ min: 1, max: 60 }),
      advance_ms: fc.integer({ min: 0, max: 40_000 }),
    });
    fc.assert(
      fc.property(fc.array(operation, { maxLength: 60 }), (operations) => {
        let state = initialLockState();
        let now = T0;
        let lastIssued = 0;
        const seenLockIds = new Set<string>();
        for (const operation of operations) {
          now += operation.advance_ms;
          const holder = currentHolder(state, now);
          let message: LockMessage | { op: '$alarm'; name: string; due_ms: number };
          switch (operation.kind) {
            case 'acquire':
              message = { op: 'acquire', owner_id: operation.owner, ttl_seconds: operation.ttl_seconds };
              break;
            case 'extend':
            case 'release':
              message = { op: operation.kind, lock_id: holder?.lock_id ?? 'none', owner_id: holder?.owner_id ?? operation.owner };
              break;
            case 'extend-wrong':
            case 'release-wrong':
              message = { op: operation.kind === 'extend-wrong' ? 'extend' : 'release', lock_id: 'lck_wrong', owner_id: operation.owner };
              break;
            case 'alarm':
              message = { op: '$alarm', name: 'expiry', due_ms: state.holder?.expires_at_ms ?? now };
              if (state.holder && state.holder.expires_at_ms > now) now = state.holder.expires_at_ms; // alarms fire when due
              break;
            default:
              message = { op: 'status' };
          }
          let result: TurnResult<LockState, LockView>;
          try {
            result = stepLock(state, message, contextAt(now));
          } catch (error) {
            if (!(error instanceof ServiceError)) throw error;
            const expected = message.op === 'acquire' ? 'lock_held' : 'lock_not_held';
            expect(error.code).toBe(expected);
            continue;
          }
          const next = result.state;
          expect(next.last_fence_token).toBeGreaterThanOrEqual(state.last_fence_token);
          if (next.holder && next.holder !== state.holder && next.holder.lock_id !== state.holder?.lock_id) {
            // A new acquisition: strictly greater than every token issued before, never a reused lock id.
            expect(next.holder.fence_token).toBeGreaterThan(lastIssued);
            expect(seenLockIds.has(next.holder.lock_id)).toBe(false);
            lastIssued = next.holder.fence_token;
            seenLockIds.add(next.holder.lock_id);
          }
          if (next.holder) expect(next.holder.fence_token).toBe(next.last_fence_token);
          expect(next.last_fence_token).toBe(lastIssued);
          state = next;
        }
      }),
      { numRuns: 300, seed: 20260101 },
    );
  });
});

describe('lock actor key', () => {
  it('includes the tenant and joins the parts unambiguously', () => {
    expect(lockActorKey('t1', 'ns', 'k')).not.toBe(lockActorKey('t2', 'ns', 'k'));
    expect(lockActorKey('t', 'a/b', 'c')).not.toBe(lockActorKey('t', 'a', 'b/c'));
    expect(lockActorKey('t', 'a","b', 'c')).not.toBe(lockActorKey('t', 'a', 'b","c'));
  });
});
