import { ServiceError, type ActorSend, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { LOCK_DIRECTORY_KIND, lockDirectoryKey, type LockHolder, type LockMessage, type LockView } from './messages.js';

/**
 * A distributed lock on one (tenant, namespace, key): pure domain logic.
 *
 * The fence counter lives in the same record as the holder and is never
 * deleted, so fence tokens strictly increase across release, expiry and
 * restart (and, replicated with the record, across failover).
 */
export interface LockState {
  holder: LockHolder | null;
  last_fence_token: number;
  /** Set once the tenant's lock directory was told about this key (absent on older locks). */
  listed?: true;
}

export const EXPIRY_ALARM = 'expiry';

export function initialLockState(): LockState {
  return { holder: null, last_fence_token: 0 };
}

/** The holder, unless its time is up (reads are correct before the alarm fires). */
export function currentHolder(state: LockState, now_ms: number): LockHolder | null {
  return state.holder && state.holder.expires_at_ms > now_ms ? state.holder : null;
}

/**
 * The first acquisition of a key tells the tenant's lock directory (once per key, through the
 * outbox), so administrators can list the tenant's locks. Locks acquired before the directory
 * existed are told at their next acquisition.
 */
function directoryAdd(actorKey: string): ActorSend {
  const [tenant, namespace, key] = JSON.parse(actorKey) as [string, string, string];
  return { kind: LOCK_DIRECTORY_KIND, key: lockDirectoryKey(tenant), message: { op: 'add', namespace, key } };
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
        state: { holder: acquired, last_fence_token: fence_token, listed: true },
        reply: { holder: acquired, last_fence_token: fence_token, now_ms: now },
        alarms: [{ name: EXPIRY_ALARM, due_ms: acquired.expires_at_ms }],
        sends: state.listed ? undefined : [directoryAdd(context.key)],
      };
    }

    case 'extend': {
      if (!holder || holder.lock_id !== message.lock_id || holder.owner_id !== message.owner_id) {
        throw new ServiceError('lock_not_held', 'This lock_id and owner_id do not hold the lock.');
      }
      const ttl_seconds = message.ttl_seconds ?? holder.ttl_seconds;
      const extended: LockHolder = { ...holder, ttl_seconds, expires_at_ms: now + ttl_seconds * 1000 };
      return {
        state: { ...state, holder: extended },
        reply: { holder: extended, last_fence_token: state.last_fence_token, now_ms: now },
        alarms: [{ name: EXPIRY_ALARM, due_ms: extended.expires_at_ms }],
      };
    }

    case 'release': {
      if (!holder || holder.lock_id !== message.lock_id || holder.owner_id !== message.owner_id) {
        throw new ServiceError('lock_not_held', 'This lock_id and owner_id do not hold the lock.');
      }
      return {
        state: { ...state, holder: null },
        reply: { holder: null, last_fence_token: state.last_fence_token, now_ms: now },
        alarms: [{ name: EXPIRY_ALARM, due_ms: null }],
      };
    }

    case '$alarm': {
      // Expiry: drop a holder whose time is up. An extended lock re-set the
      // alarm, so the runtime never delivers the old one; the check is for safety.
      if (state.holder && !holder) {
        return { state: { ...state, holder: null }, reply: undefined };
      }
      return { state };
    }
  }
}
