/**
 * The vault area's public surface (spec doc 2 §2 Vault, §3 Attestation,
 * §4.1; docs/api/vault.md): attestations whose content is locked until a
 * condition holds (a time, witnesses' signatures, a lottery draw), with a
 * Merkle proof of what was locked and a history. One actor per attestation,
 * one index per tenant for lists. Other layers import this file only.
 */

/** One actor per attestation (key = attestation id). */
export const ATTESTATION_KIND = 'attestation';
/** One actor per tenant (key = attestationIndexKey(tenant)): summaries for the list. */
export const ATTESTATION_INDEX_KIND = 'attestation-index';

export function attestationIndexKey(tenant: string): string {
  return JSON.stringify([tenant]);
}

export const LOCK_TYPES = ['time_lock', 'witness', 'lottery'] as const;
export type LockType = (typeof LOCK_TYPES)[number];
export const ATTESTATION_STATUSES = ['locked', 'partially_unlocked', 'unlocked'] as const;
export type AttestationStatus = (typeof ATTESTATION_STATUSES)[number];

/** Every bound of the area; docs/api/vault.md documents each (change both together). */
export const vaultPolicy = {
  content_bytes_max: 65_536,
  content_type_length_max: 100,
  signers_max: 16,
  signer_id_length_max: 64,
  shares_default: 3,
  share_threshold_default: 2,
  shares_max: 16,
  /** A lock may not run longer than this. */
  lock_ms_max: 10 * 365 * 24 * 3_600_000,
  /** Lottery entries one request may buy. */
  entries_per_request_max: 1_000,
  /** Entries an attestation's lottery takes in all; the draw is computed over this many at creation. */
  lottery_entries_max: 100_000,
  /** History events kept per attestation (then only counted). */
  history_kept_max: 1_000,
  page_size_max: 100,
} as const;

/** One witness named at creation: an id and an Ed25519 public key (base64 of the 32 raw bytes). */
export interface Signer {
  signer: string;
  public_key: string;
}

/** The lock as configured; every condition given must hold (docs/api/vault.md, "Lock types and combinations"). */
export interface LockConfig {
  type: LockType;
  /** epoch-ms; required for time_lock, optional ("not before") for the others. */
  unlock_at_ms: number | null;
  witnesses: { signers: Signer[]; threshold: number } | null;
  lottery: { odds_per_entry: number; max_entries: number } | null;
}

/** What the edge sealed at creation; the actor keeps it and never holds the key in clear. */
export interface SealedMaterial {
  /** AES-256-GCM of the content under the content key: base64 of nonce(12) | ciphertext | tag(16); AAD = attestation id. */
  sealed_content: string;
  /** The content key sealed under the node's vault seal key (same layout). */
  sealed_key: string;
  /** The lottery seed sealed the same way (lottery locks), revealed with the result. */
  sealed_lottery_seed: string | null;
}

export interface ProofLeaf {
  label: string;
  value: string;
  hash: string;
}

export interface LockProof {
  leaves: ProofLeaf[];
  merkle_root: string;
}

export interface WitnessRecord {
  signer: string;
  signed_at_ms: number;
  signature: string;
}

export interface HistoryEvent {
  event_id: string;
  event_type: string;
  actor: string;
  timestamp_ms: number;
  details: unknown;
}

/** The attestation as stored (epoch-ms); the edge renders it. */
export interface AttestationRecord {
  attestation_id: string;
  tenant: string;
  owner: string;
  content_type: string;
  content_hash: string;
  key_commitment: string;
  share_threshold: number;
  share_count: number;
  lock: LockConfig;
  lock_proof: LockProof;
  sealed: SealedMaterial;
  /** SHA-256 (hex) of the lottery seed, a leaf of the proof: the draw's commitment. */
  lottery_commitment: string | null;
  /** The first winning entry (0-based) of the lottery, computed at creation from the seed; null: none within max_entries. */
  lottery_winning_entry: number | null;
  status: AttestationStatus;
  created_at_ms: number;
  witnesses: WitnessRecord[];
  lottery_total_entries: number;
  /** Who bought the winning entry. */
  lottery_winner: string | null;
  unlocked_at_ms: number | null;
  unlock_method: string | null;
  history_count: number;
}

export interface AttestationCaller {
  user_id: string;
  tenant: string;
  admin: boolean;
}

export type AttestationMessage =
  | {
      op: 'create';
      record: Omit<AttestationRecord, 'status' | 'witnesses' | 'lottery_total_entries' | 'lottery_winner' | 'unlocked_at_ms' | 'unlock_method' | 'history_count'>;
    }
  | { op: 'status'; caller: AttestationCaller }
  | { op: 'history'; caller: AttestationCaller }
  | { op: 'witness'; caller: AttestationCaller; signer: string; signature: string }
  | { op: 'enter'; caller: AttestationCaller; entry_count: number }
  | { op: 'unlock'; caller: AttestationCaller };

/** status, witness, enter and unlock answer the record (the edge shapes it); history adds the events. */
export interface AttestationReply {
  record: AttestationRecord;
}
/**
 * The reply's own fields are as of the request's turn; `record` is the
 * actor's live record, which later turns of the same batch may have changed
 * by the time the reply is released (after the batch's commit).
 */
export interface WitnessReply extends AttestationReply {
  signature_valid: boolean;
  witnessed_at_ms: number;
  /** Signatures counted once this one was (or, signing again, at this turn). */
  signatures_collected: number;
  status: AttestationStatus;
}
export interface EnterReply extends AttestationReply {
  entries_purchased: number;
  /** True when this request bought the winning entry. */
  won: boolean;
  /** True when this request won and every condition of the lock holds: only then may its answer carry the content key. */
  revealed: boolean;
  total_entries: number;
  status: AttestationStatus;
}
export interface HistoryReply extends AttestationReply {
  events: HistoryEvent[];
}

export interface AttestationSummaryEntry {
  attestation_id: string;
  owner: string;
  content_type: string;
  lock_type: LockType;
  status: AttestationStatus;
  created_at_ms: number;
  unlock_at_ms: number | null;
}

export type AttestationIndexMessage =
  | { op: 'upsert'; entry: AttestationSummaryEntry }
  | { op: 'list'; status?: AttestationStatus; page: number; page_size: number };

export interface AttestationListView {
  total: number;
  attestations: AttestationSummaryEntry[];
}

export { leafHash, merkleRoot, buildLockProof, canonicalJson } from './merkle.js';
export { witnessMessage, verifyWitnessSignature, parsePublicKey } from './witness.js';
export { lotteryDraw, firstWinningEntry, firstWinningEntryYielding, winProbability } from './lottery.js';
export { unlockProgress, type UnlockProgress } from './conditions.js';
export { contentHash, keyCommitment, lotteryCommitment } from './commitments.js';
