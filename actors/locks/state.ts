import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import type { LockHolder, LockMessage, LockView } from './messages.js';

/**
 * A distributed lock on one (tenant, namespace, key): pure domain logic.
 *
 * The fence counter lives in the same record as the holder and is never
 * deleted, so fence tokens strictly increase across release, expiry and
 * restart (and, replicated with the record, across failover).
 *
 * Expiry needs no timer: a holder whose `expires_at_ms` has passed is no
 * holder for every read and write (`currentHolder`), so acquiring, extending
 * and releasing each write the lock's one record and nothing else. (Locks
 * once set an expiry alarm that only cleared the record; one still stored
 * from then fires as `$alarm` and is handled below.)
 */
export interface LockState {
  holder: LockHolder | null;
  last_fence_token: number;
}

export function initialLockState(): LockState {
  return { holder: null, last_fence_token: 0 };
}

/** The holder, unless its time is up. */
export function currentHolder(state: LockState, now_ms: number): LockHolder | null {
  return state.holder && state.holder.expires_at_ms > now_ms ? state.holder : null;
}

export function stepLock(state: LockState, message: LockMessage | AlarmMessage, context: TurnContext): TurnResult<LockState, LockView> {
  const now = context.now;
  const holder = currentHolder(state, now);
  switch (message.op) {
    case 'status':
      return { state, reply: { holder, last_fence_token: state.last_fence_token, now_ms: now } };

    case 'acquire': {
      if (holder) {
        if (holder.owner_id !== message.owner_id) {
          throw new ServiceError('lock_held', 'The lock is held by another owner.');
        }
        // Re-acquiring by the holder returns the current lock unchanged.
        return { state, reply: { holder, last_fence_token: state.last_fence_token, now_ms: now } };
      }
      const fence_token = state.last_fence_token + 1;
      const acquired: LockHolder = {
        lock_id: context.newId('lck_'),
        owner_id: message.owner_id,
        acquired_at_ms: now,
        expires_at_ms: now + message.ttl_seconds * 1000,
        ttl_seconds: message.ttl_seconds,
        fence_token,
        metadata: message.metadata ?? null,
      };
      return {
        state: { holder: acquired, last_fence_token: fence_token },
        reply: { holder: acquired, last_fence_token: fence_token, now_ms: now },
      };
    }

    case 'extend': {
      if (!holder || holder.lock_id !== message.lock_id || holder.owner_id !== message.owner_id) {
        throw new ServiceError('lock_not_held', 'This lock_id and owner_id do not hold the lock.');
      }
      const ttl_seconds = message.ttl_seconds ?? holder.ttl_seconds;
      const extended: LockHolder = { ...holder, ttl_seconds, expires_at_ms: now + ttl_seconds * 1000 };
      return {
        state: { holder: extended, last_fence_token: state.last_fence_token },
        reply: { holder: extended, last_fence_token: state.last_fence_token, now_ms: now },
      };
    }

    case 'release': {
      if (!holder || holder.lock_id !== message.lock_id || holder.owner_id !== message.owner_id) {
        throw new ServiceError('lock_not_held', 'This lock_id and owner_id do not hold the lock.');
      }
      return {
        state: { holder: null, last_fence_token: state.last_fence_token },
        reply: { holder: null, last_fence_token: state.last_fence_token, now_ms: now },
      };
    }

    case '$alarm': {
      // An expiry alarm stored by an earlier version: drop a holder whose time is up.
      if (state.holder && !holder) {
        return { state: { holder: null, last_fence_token: state.last_fence_token }, reply: undefined };
      }
      return { state };
    }
  }
}
