import { timingSafeEqual } from 'node:crypto';
import { ServiceError } from '../../runtime/index.js';
import type { PresentedCode } from './messages.js';
import { base32Decode, matchTotp } from './totp.js';

/**
 * A user's TOTP two-factor state and its rules, pure. The edge generates the
 * secret and backup codes (randomness) and hashes presented codes; this module
 * decides. A TOTP step is accepted at most once (never the same code twice),
 * backup codes are single-use and stored only as hashes, and a login
 * challenge allows a bounded number of wrong codes.
 */
export interface TwoFactorState {
  enabled: boolean;
  secret_b32: string | null;
  pending_secret_b32: string | null;
  pending_backup_hashes: string[];
  backup_hashes: string[];
  /** Highest TOTP time step accepted; codes at or below it are refused. */
  last_step: number;
  /** Login challenges: id -> wrong codes so far, or -1 once used. Newest last, bounded. */
  challenges: [string, number][];
}

/** Clock skew tolerated: one 30 s step either side. */
export const TOTP_WINDOW_STEPS = 1;
export const CHALLENGE_FAILURES_MAX = 5;
const CHALLENGES_KEPT = 20;

export function emptyTwoFactor(): TwoFactorState {
  return { enabled: false, secret_b32: null, pending_secret_b32: null, pending_backup_hashes: [], backup_hashes: [], last_step: 0, challenges: [] };
}

/** A code presented by the user: the digits (for TOTP) and the hash of its normalised form (for backup codes). */
export type { PresentedCode };

type Verdict = { ok: true; state: TwoFactorState } | { ok: false };

function totpVerdict(state: TwoFactorState, secret_b32: string, code: string, now_ms: number): Verdict {
  const secret = base32Decode(secret_b32);
  if (!secret) return { ok: false };
  const step = matchTotp(secret, code, now_ms, TOTP_WINDOW_STEPS);
  if (step === null || step <= state.last_step) return { ok: false };
  return { ok: true, state: { ...state, last_step: step } };
}

function backupVerdict(state: TwoFactorState, code_hash: string): Verdict {
  const presented = Buffer.from(code_hash);
  let index = -1;
  state.backup_hashes.forEach((hash, i) => {
    const stored = Buffer.from(hash);
    if (stored.length === presented.length && timingSafeEqual(stored, presented) && index < 0) index = i;
  });
  if (index < 0) return { ok: false };
  return { ok: true, state: { ...state, backup_hashes: state.backup_hashes.filter((_, i) => i !== index) } };
}

/** Checks an enabled user's code: TOTP, or a backup code where allowed (which is then spent). */
export function verifyCode(state: TwoFactorState, presented: PresentedCode, now_ms: number, allowBackup: boolean): Verdict {
  if (!state.enabled || !state.secret_b32) return { ok: false };
  const byTotp = totpVerdict(state, state.secret_b32, presented.code, now_ms);
  if (byTotp.ok || !allowBackup) return byTotp;
  return backupVerdict(state, presented.code_hash);
}

export function beginSetup(state: TwoFactorState, secret_b32: string, backup_hashes: string[]): TwoFactorState {
  if (state.enabled) throw new ServiceError('conflict', 'Two-factor authentication is already enabled; disable it first.');
  return { ...state, pending_secret_b32: secret_b32, pending_backup_hashes: backup_hashes };
}

export function completeSetup(state: TwoFactorState, code: string, now_ms: number): TwoFactorState {
  if (state.enabled) throw new ServiceError('conflict', 'Two-factor authentication is already enabled.');
  if (!state.pending_secret_b32) throw new ServiceError('conflict', 'Start with POST /api/v1/auth/2fa/totp/setup.');
  const verdict = totpVerdict(state, state.pending_secret_b32, code, now_ms);
  if (!verdict.ok) throw new ServiceError('invalid_two_factor_code', 'The code is not valid for the new secret.');
  return {
    ...verdict.state,
    enabled: true,
    secret_b32: state.pending_secret_b32,
    backup_hashes: state.pending_backup_hashes,
    pending_secret_b32: null,
    pending_backup_hashes: [],
  };
}

/** The challenge's wrong-code count, or -1 once used; 0 for a new one. */
export function challengeFailures(state: TwoFactorState, challenge_id: string): number {
  return state.challenges.find(([id]) => id === challenge_id)?.[1] ?? 0;
}

export function recordChallenge(state: TwoFactorState, challenge_id: string, failures: number): TwoFactorState {
  const others = state.challenges.filter(([id]) => id !== challenge_id);
  return { ...state, challenges: [...others, [challenge_id, failures] as [string, number]].slice(-CHALLENGES_KEPT) };
}
