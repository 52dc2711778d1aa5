import type { AttestationRecord, AttestationStatus } from './messages.js';

/**
 * Where an attestation's lock stands. Every condition the lock names must
 * hold (docs/api/vault.md, "Lock types and combinations"): the time
 * (unlock_at reached), the witnesses (threshold valid signatures), the
 * lottery (a winning entry bought). `partially_unlocked` means some of it is
 * there (a condition met, or some signatures) but not all.
 */
export interface UnlockProgress {
  /** null when the lock names no time. */
  time_reached: boolean | null;
  signatures_collected: number;
  signatures_required: number;
  /** null when the lock has no lottery. */
  lottery_won: boolean | null;
  holds: boolean;
  status: AttestationStatus;
}

export function unlockProgress(record: Pick<AttestationRecord, 'lock' | 'witnesses' | 'lottery_winner' | 'unlocked_at_ms'>, now: number): UnlockProgress {
  const { lock } = record;
  const time_reached = lock.unlock_at_ms === null ? null : now >= lock.unlock_at_ms;
  const signatures_required = lock.witnesses?.threshold ?? 0;
  const signatures_collected = record.witnesses.length;
  const lottery_won = lock.lottery === null ? null : record.lottery_winner !== null;
  const met = [time_reached, lock.witnesses === null ? null : signatures_collected >= signatures_required, lottery_won].filter((value) => value !== null);
  // Once unlocked, always unlocked: the content was revealable and may have been read.
  const holds = record.unlocked_at_ms !== null || met.every(Boolean);
  const some = met.some(Boolean) || signatures_collected > 0;
  const status: AttestationStatus = holds ? 'unlocked' : some ? 'partially_unlocked' : 'locked';
  return { time_reached, signatures_collected, signatures_required, lottery_won, holds, status };
}
