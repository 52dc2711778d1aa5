import { createHash, randomBytes } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { split } from 'shamir-secret-sharing';
import { randomId, ServiceError } from '../../runtime/index.js';
import {
  ATTESTATION_INDEX_KIND,
  ATTESTATION_KIND,
  ATTESTATION_STATUSES,
  attestationIndexKey,
  buildLockProof,
  canonicalJson,
  contentHash,
  firstWinningEntryYielding,
  keyCommitment,
  LOCK_TYPES,
  lotteryCommitment,
  parsePublicKey,
  unlockProgress,
  vaultPolicy as policy,
  winProbability,
  witnessMessage,
  type AttestationCaller,
  type AttestationListView,
  type AttestationMessage,
  type AttestationRecord,
  type AttestationReply,
  type AttestationStatus,
  type AttestationSummaryEntry,
  type EnterReply,
  type HistoryReply,
  type LockConfig,
  type WitnessReply,
} from '../../actors/vault/messages.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import type { Principal } from '../auth/principal.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime } from '../schemas.js';
import type { AppServices } from '../services.js';
import { aesGcmOpen, aesGcmSeal, vaultSealFor, type VaultSeal } from '../vault-crypto.js';

/** Vault attestations (spec doc 2 §4.1; docs/api/vault.md). */
const tags = ['vault'];
const base = '/api/v1/vault/attestations';

const literals = <T extends string>(values: readonly T[]) => Type.Union(values.map((value) => Type.Literal(value)));
const Ts = Type.String({ format: 'date-time' });
const NullableTs = Type.Union([Ts, Type.Null()]);
const Status = literals(ATTESTATION_STATUSES);
const IdParams = Type.Object({ attestation_id: Type.String({ minLength: 1, maxLength: 64 }) });

const SignerSchema = Type.Object({
  signer: Type.String({ minLength: 1, maxLength: policy.signer_id_length_max, description: 'The witness\'s id, as it will sign.' }),
  public_key: Type.String({ minLength: 44, maxLength: 44, description: 'Ed25519 public key: base64 of its 32 raw bytes.' }),
});
const CreateBody = Type.Object({
  content: Type.Object({
    data: Type.String({ maxLength: policy.content_bytes_max, description: `The content to lock (UTF-8 text; binary as base64), at most ${policy.content_bytes_max} bytes.` }),
    type: Type.String({ minLength: 1, maxLength: policy.content_type_length_max, description: 'Its media type, e.g. text/plain.' }),
  }),
  lock_config: Type.Object({
    type: literals(LOCK_TYPES),
    unlock_at: Type.Optional(Type.String({ format: 'date-time', description: 'Required for time_lock; for the other types, a "not before" time that must also be reached.' })),
    witnesses: Type.Optional(
      Type.Object({
        signers: Type.Array(SignerSchema, { minItems: 1, maxItems: policy.signers_max }),
        threshold: Type.Optional(Type.Integer({ minimum: 1, maximum: policy.signers_max, description: 'Valid signatures needed; default: every signer.' })),
      }),
    ),
    lottery: Type.Optional(
      Type.Object({
        odds_per_entry: Type.Number({ exclusiveMinimum: 0, maximum: 1, description: 'Chance that one entry wins.' }),
        max_entries: Type.Optional(Type.Integer({ minimum: 1, maximum: policy.lottery_entries_max, description: 'Entries the lottery sells in all; default 10000.' })),
      }),
    ),
  }),
  share_count: Type.Optional(Type.Integer({ minimum: 2, maximum: policy.shares_max, description: `Holder shares of the content key; default ${policy.shares_default}.` })),
  share_threshold: Type.Optional(Type.Integer({ minimum: 2, maximum: policy.shares_max, description: `Shares needed to rebuild the key; default ${policy.share_threshold_default}.` })),
});
const ProofLeaf = Type.Object({ label: Type.String(), value: Type.String(), hash: Type.String() });
const LockProof = Type.Object({ leaves: Type.Array(ProofLeaf), merkle_root: Type.String() });
const Created = Type.Object(
  {
    attestation_id: Type.String(),
    content_hash: Type.String(),
    holder_shares: Type.Array(Type.String(), { description: 'Shamir shares of the content key (base64); shown once, never stored by the service.' }),
    key_commitment: Type.String(),
    lock_proof: LockProof,
    locked_at: Ts,
    share_threshold: Type.Integer(),
    status: Status,
    unlock_scheduled: NullableTs,
    sealed_content: Type.String({ description: 'base64 of nonce(12) | AES-256-GCM ciphertext | tag(16); AAD = attestation_id.' }),
    witness_message: Type.Union([Type.String(), Type.Null()], { description: 'What each witness signs (witness locks).' }),
  },
  { title: 'AttestationCreated' },
);
const SignerProgress = Type.Object({ signed_at: Ts, signer: Type.String() });
const LotteryStatus = Type.Union([
  Type.Object({ odds_per_entry: Type.Number(), max_entries: Type.Integer(), total_entries: Type.Integer(), current_probability: Type.Number(), won: Type.Boolean(), commitment: Type.String() }),
  Type.Null(),
]);
const StatusView = Type.Object(
  {
    attestation_id: Type.String(),
    created_at: Ts,
    lock_type: literals(LOCK_TYPES),
    lottery_status: LotteryStatus,
    owner: Type.String(),
    status: Status,
    time_remaining_seconds: Type.Union([Type.Integer(), Type.Null()]),
    unlock_at: NullableTs,
    unlock_progress: Type.Object({ signatures_collected: Type.Integer(), signatures_required: Type.Integer(), signers: Type.Array(SignerProgress) }),
    content_type: Type.String(),
    content_hash: Type.String(),
    key_commitment: Type.String(),
    lock_proof: LockProof,
    sealed_content: Type.String(),
    witness_message: Type.Union([Type.String(), Type.Null()]),
    unlocked_at: NullableTs,
  },
  { title: 'AttestationStatus' },
);
const Summary = Type.Object(
  { attestation_id: Type.String(), content_type: Type.String(), created_at: Ts, lock_type: literals(LOCK_TYPES), status: Status, unlock_at: NullableTs, owner: Type.String() },
  { title: 'AttestationSummary' },
);
const UnlockResult = Type.Object(
  {
    attestation_id: Type.String(),
    message: Type.String(),
    revealed: Type.Object({ data: Type.String(), type: Type.String() }),
    signatures_collected: Type.Integer(),
    signatures_required: Type.Integer(),
    status: Status,
    unlock_method: Type.String(),
    unlock_proof: Type.Object({
      content_key: Type.String({ description: 'The content key, base64: check it against key_commitment.' }),
      key_commitment: Type.String(),
      content_hash: Type.String(),
      merkle_root: Type.String(),
      lottery_seed: Type.Union([Type.String(), Type.Null()]),
      lottery_winning_entry: Type.Union([Type.Integer(), Type.Null()]),
      signatures: Type.Array(Type.Object({ signer: Type.String(), signature: Type.String(), signed_at: Ts })),
    }),
    unlocked_at: Ts,
  },
  { title: 'UnlockResult' },
);

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

function callerOf(principal: Principal): AttestationCaller {
  return { user_id: principal.user_id, tenant: principal.tenant, admin: principal.role === 'admin' };
}

/** The lock as configured, checked: every rule of docs/api/vault.md, "Lock types and combinations". */
function lockFrom(body: Static<typeof CreateBody>['lock_config'], now: number): LockConfig {
  let unlock_at_ms: number | null = null;
  if (body.unlock_at !== undefined) {
    unlock_at_ms = Date.parse(body.unlock_at);
    if (!Number.isFinite(unlock_at_ms)) throw badRequest('body.lock_config.unlock_at', 'must be an RFC 3339 time');
    if (unlock_at_ms <= now) throw badRequest('body.lock_config.unlock_at', 'must be in the future');
    if (unlock_at_ms - now > policy.lock_ms_max) throw badRequest('body.lock_config.unlock_at', 'must be at most 10 years ahead');
  }
  if (body.type === 'time_lock' && unlock_at_ms === null) throw badRequest('body.lock_config.unlock_at', 'is required for a time_lock');
  if (body.type === 'witness' && !body.witnesses) throw badRequest('body.lock_config.witnesses', 'is required for a witness lock');
  if (body.type === 'lottery' && !body.lottery) throw badRequest('body.lock_config.lottery', 'is required for a lottery lock');
  let witnesses: LockConfig['witnesses'] = null;
  if (body.witnesses) {
    const { signers } = body.witnesses;
    const ids = new Set<string>();
    signers.forEach((signer, i) => {
      if (ids.has(signer.signer)) throw badRequest(`body.lock_config.witnesses.signers.${i}.signer`, 'is named twice');
      ids.add(signer.signer);
      if (!parsePublicKey(signer.public_key)) throw badRequest(`body.lock_config.witnesses.signers.${i}.public_key`, 'must be an Ed25519 public key: base64 of its 32 raw bytes');
    });
    const threshold = body.witnesses.threshold ?? signers.length;
    if (threshold > signers.length) throw badRequest('body.lock_config.witnesses.threshold', 'cannot exceed the number of signers');
    witnesses = { signers: signers.map(({ signer, public_key }) => ({ signer, public_key })), threshold };
  }
  const lottery = body.lottery ? { odds_per_entry: body.lottery.odds_per_entry, max_entries: body.lottery.max_entries ?? 10_000 } : null;
  return { type: body.type, unlock_at_ms, witnesses, lottery };
}

/** The lock configuration as a proof leaf's value (the public parts, canonical JSON). */
function lockLeafValue(lock: LockConfig): string {
  return canonicalJson({ type: lock.type, unlock_at: isoTime(lock.unlock_at_ms), witnesses: lock.witnesses, lottery: lock.lottery });
}

function statusShape(record: AttestationRecord, now: number) {
  const progress = unlockProgress(record, now);
  const lottery = record.lock.lottery;
  return {
    attestation_id: record.attestation_id,
    created_at: isoTime(record.created_at_ms)!,
    lock_type: record.lock.type,
    lottery_status: lottery
      ? {
          odds_per_entry: lottery.odds_per_entry,
          max_entries: lottery.max_entries,
          total_entries: record.lottery_total_entries,
          current_probability: record.lottery_winner !== null ? 1 : winProbability(lottery.odds_per_entry, record.lottery_total_entries),
          won: record.lottery_winner !== null,
          commitment: record.lottery_commitment!,
        }
      : null,
    owner: record.owner,
    status: progress.status,
    time_remaining_seconds: record.lock.unlock_at_ms === null ? null : Math.max(0, Math.ceil((record.lock.unlock_at_ms - now) / 1000)),
    unlock_at: isoTime(record.lock.unlock_at_ms),
    unlock_progress: {
      signatures_collected: progress.signatures_collected,
      signatures_required: progress.signatures_required,
      signers: record.witnesses.map((witness) => ({ signed_at: isoTime(witness.signed_at_ms)!, signer: witness.signer })),
    },
    content_type: record.content_type,
    content_hash: record.content_hash,
    key_commitment: record.key_commitment,
    lock_proof: record.lock_proof,
    sealed_content: record.sealed.sealed_content,
    witness_message: record.lock.witnesses ? witnessMessage(record.attestation_id, record.content_hash, record.lock_proof.merkle_root) : null,
    unlocked_at: isoTime(record.unlocked_at_ms),
  };
}

function summaryShape(entry: AttestationSummaryEntry) {
  return {
    attestation_id: entry.attestation_id,
    content_type: entry.content_type,
    created_at: isoTime(entry.created_at_ms)!,
    lock_type: entry.lock_type,
    status: entry.status,
    unlock_at: isoTime(entry.unlock_at_ms),
    owner: entry.owner,
  };
}

export function vaultRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const schema = (summary: string, parts: Record<string, unknown>, responses: Record<number, unknown>, errors: number[] = []) => ({
    tags,
    summary,
    security: bearerSecurity,
    ...parts,
    response: { ...responses, ...errorResponses(...bearerErrors, ...errors) },
  });
  const attestation = <Reply>(attestation_id: string, message: AttestationMessage) => services.actors.ask<Reply>(ATTESTATION_KIND, attestation_id, message);
  const readAttestation = <Reply>(attestation_id: string, message: AttestationMessage) =>
    services.actors.ask<Reply>(ATTESTATION_KIND, attestation_id, message, { readOnly: true });
  const requireSeal = (): VaultSeal => {
    const seal = vaultSealFor(services.config);
    if (!seal) throw new ServiceError('vault_unavailable', 'This node has no vault seal key: set VAULT_SEAL_KEY (the same on every cluster node).');
    return seal;
  };
  /** The content key, unsealed for a reveal the attestation's actor allowed. */
  const contentKeyOf = (record: AttestationRecord): Buffer => requireSeal().unseal(record.sealed.sealed_key, record.attestation_id);

  app.get<{ Querystring: { status?: AttestationStatus; page?: number; page_size?: number } }>(base, {
    onRequest: authenticate,
    schema: schema(
      "The tenant's attestations, newest first; status filters.",
      {
        querystring: Type.Object({
          status: Type.Optional(Status),
          page: Type.Optional(Type.Integer({ minimum: 0 })),
          page_size: Type.Optional(Type.Integer({ minimum: 0 })),
        }),
      },
      { 200: Type.Object({ attestations: Type.Array(Summary), page: Type.Integer(), page_size: Type.Integer(), total: Type.Integer() }) },
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const page = Math.max(1, request.query.page ?? 1);
    const page_size = Math.min(policy.page_size_max, request.query.page_size || 20);
    const view = await services.actors.ask<AttestationListView>(
      ATTESTATION_INDEX_KIND,
      attestationIndexKey(principal.tenant),
      { op: 'list', status: request.query.status, page, page_size },
      { readOnly: true },
    );
    return { attestations: view.attestations.map(summaryShape), page, page_size, total: view.total };
  });

  app.post<{ Body: Static<typeof CreateBody> }>(base, {
    onRequest: authenticate,
    schema: schema(
      'Lock content: encrypted under a fresh key (AES-256-GCM), the key sealed by the node and split into holder shares (Shamir), a Merkle lock proof over what was locked. holder_shares are shown once.',
      { body: CreateBody },
      { 201: Created },
      [503],
    ),
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const body = request.body;
    const now = services.clock.now();
    const data = Buffer.from(body.content.data, 'utf8');
    if (data.length > policy.content_bytes_max) throw badRequest('body.content.data', `must be at most ${policy.content_bytes_max} bytes`);
    const lock = lockFrom(body.lock_config, now);
    const share_count = body.share_count ?? policy.shares_default;
    const share_threshold = body.share_threshold ?? Math.min(policy.share_threshold_default, share_count);
    if (share_threshold > share_count) throw badRequest('body.share_threshold', 'cannot exceed share_count');
    const seal = requireSeal();

    const attestation_id = randomId('att_');
    const contentKey = randomBytes(32);
    const sealed_content = aesGcmSeal(contentKey, data, attestation_id);
    const content_hash = contentHash(body.content.data);
    const key_commitment = keyCommitment(attestation_id, contentKey);
    const holder_shares = (await split(new Uint8Array(contentKey), share_count, share_threshold)).map((share) => Buffer.from(share).toString('base64'));
    let lottery_commitment: string | null = null;
    let lottery_winning_entry: number | null = null;
    let sealed_lottery_seed: string | null = null;
    if (lock.lottery) {
      const seed = randomBytes(32);
      lottery_commitment = lotteryCommitment(seed);
      lottery_winning_entry = await firstWinningEntryYielding(seed, attestation_id, lock.lottery.odds_per_entry, lock.lottery.max_entries);
      sealed_lottery_seed = seal.seal(seed, attestation_id);
    }
    const leaves = [
      { label: 'attestation_id', value: attestation_id },
      { label: 'owner', value: principal.user_id },
      { label: 'content_type', value: body.content.type },
      { label: 'content_hash', value: content_hash },
      { label: 'ciphertext_hash', value: createHash('sha256').update(Buffer.from(sealed_content, 'base64')).digest('hex') },
      { label: 'key_commitment', value: key_commitment },
      { label: 'lock_config', value: lockLeafValue(lock) },
      { label: 'share_threshold', value: String(share_threshold) },
      { label: 'share_count', value: String(share_count) },
      { label: 'locked_at', value: isoTime(now)! },
    ];
    if (lottery_commitment) leaves.push({ label: 'lottery_commitment', value: lottery_commitment });
    const lock_proof = buildLockProof(leaves);
    const { record } = await attestation<AttestationReply>(attestation_id, {
      op: 'create',
      record: {
        attestation_id,
        tenant: principal.tenant,
        owner: principal.user_id,
        content_type: body.content.type,
        content_hash,
        key_commitment,
        share_threshold,
        share_count,
        lock,
        lock_proof,
        sealed: { sealed_content, sealed_key: seal.seal(contentKey, attestation_id), sealed_lottery_seed },
        lottery_commitment,
        lottery_winning_entry,
        created_at_ms: now,
      },
    });
    return reply.code(201).send({
      attestation_id,
      content_hash,
      holder_shares,
      key_commitment,
      lock_proof,
      locked_at: isoTime(now)!,
      share_threshold,
      status: record.status,
      unlock_scheduled: isoTime(lock.unlock_at_ms),
      sealed_content,
      witness_message: lock.witnesses ? witnessMessage(attestation_id, content_hash, lock_proof.merkle_root) : null,
    });
  });

  app.get<{ Params: Static<typeof IdParams> }>(`${base}/:attestation_id/status`, {
    onRequest: authenticate,
    schema: schema("The lock's progress, the proof and the sealed content.", { params: IdParams }, { 200: StatusView }, [404]),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { record } = await readAttestation<AttestationReply>(request.params.attestation_id, { op: 'status', caller: callerOf(principal) });
    return statusShape(record, services.clock.now());
  });

  app.get<{ Params: Static<typeof IdParams> }>(`${base}/:attestation_id/history`, {
    onRequest: authenticate,
    schema: schema(
      `Every event, oldest first (the first ${policy.history_kept_max} are kept; total_events counts all).`,
      { params: IdParams },
      {
        200: Type.Object({
          attestation_id: Type.String(),
          events: Type.Array(Type.Object({ actor: Type.String(), details: Type.Unknown(), event_id: Type.String(), event_type: Type.String(), timestamp: Ts })),
          total_events: Type.Integer(),
        }),
      },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { record, events } = await readAttestation<HistoryReply>(request.params.attestation_id, { op: 'history', caller: callerOf(principal) });
    return {
      attestation_id: record.attestation_id,
      events: events.map((event) => ({ actor: event.actor, details: event.details ?? null, event_id: event.event_id, event_type: event.event_type, timestamp: isoTime(event.timestamp_ms)! })),
      total_events: record.history_count,
    };
  });

  app.post<{ Params: Static<typeof IdParams>; Body: { signer: string; signature: string } }>(`${base}/:attestation_id/witness`, {
    onRequest: authenticate,
    schema: schema(
      "A named witness's Ed25519 signature of the attestation's witness message (base64 of 64 bytes). Any authenticated caller may submit it: the signature is the credential. A signature that does not verify: 400 invalid_signature, nothing recorded.",
      {
        params: IdParams,
        body: Type.Object({ signer: Type.String({ minLength: 1, maxLength: policy.signer_id_length_max }), signature: Type.String({ minLength: 1, maxLength: 200 }) }),
      },
      {
        200: Type.Object(
          { attestation_id: Type.String(), current: Type.Integer(), required: Type.Integer(), signature_valid: Type.Boolean(), witness: Type.String(), witnessed_at: Ts, status: Status },
          { title: 'WitnessResult' },
        ),
      },
      [404],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const result = await attestation<WitnessReply>(request.params.attestation_id, { op: 'witness', caller: callerOf(principal), signer: request.body.signer, signature: request.body.signature });
    // The count and status as of this signature's turn (the record may have moved on since, in the same batch).
    return {
      attestation_id: result.record.attestation_id,
      current: result.signatures_collected,
      required: result.record.lock.witnesses?.threshold ?? 0,
      signature_valid: result.signature_valid,
      witness: request.body.signer,
      witnessed_at: isoTime(result.witnessed_at_ms)!,
      status: result.status,
    };
  });

  app.post<{ Params: Static<typeof IdParams>; Body: { entry_count: number } }>(`${base}/:attestation_id/lottery/enter`, {
    onRequest: authenticate,
    schema: schema(
      `Buy lottery entries (1..${policy.entries_per_request_max}; free: the service keeps no payment for them). The request that buys the winning entry gets won: true; it gets the content key too (revealed: true) only when every other condition of the lock holds already. Otherwise the winner reads the content with unlock once the attestation opens.`,
      { params: IdParams, body: Type.Object({ entry_count: Type.Integer({ minimum: 1, maximum: policy.entries_per_request_max }) }) },
      {
        200: Type.Object(
          {
            attestation_id: Type.String(),
            content_key: Type.Union([Type.String(), Type.Null()], { description: 'base64; only in the answer that bought the winning entry, and only when every condition of the lock holds (revealed: true).' }),
            current_probability: Type.Number(),
            entries_purchased: Type.Integer(),
            revealed: Type.Boolean({ description: 'True when this answer carries the content key.' }),
            won: Type.Boolean({ description: 'True when this request bought the winning entry.' }),
            status: Status,
            total_entries: Type.Integer(),
          },
          { title: 'LotteryEntry' },
        ),
      },
      [404, 409, 503],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const result = await attestation<EnterReply>(request.params.attestation_id, { op: 'enter', caller: callerOf(principal), entry_count: request.body.entry_count });
    const { record } = result;
    const lottery = record.lock.lottery!;
    // The actor decides the reveal: a win alone is one condition, not the lock (docs/api/vault.md, "Lottery").
    // Counts and status as of this request's turn; the lottery was open then, so it was won by this request or not yet.
    return {
      attestation_id: record.attestation_id,
      content_key: result.revealed ? contentKeyOf(record).toString('base64') : null,
      current_probability: result.won ? 1 : winProbability(lottery.odds_per_entry, result.total_entries),
      entries_purchased: result.entries_purchased,
      revealed: result.revealed,
      won: result.won,
      status: result.status,
      total_entries: result.total_entries,
    };
  });

  app.post<{ Params: Static<typeof IdParams> }>(`${base}/:attestation_id/unlock`, {
    onRequest: authenticate,
    preValidation: async (request) => {
      if (request.body === undefined || request.body === null) request.body = {};
    },
    schema: schema(
      'Reveal the content once the lock condition holds (the tenant, platform admins, the lottery winner). Otherwise 409 attestation_locked with the progress in details.',
      { params: IdParams, body: Type.Object({}) },
      { 200: UnlockResult },
      [404, 409, 503],
    ),
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { record } = await attestation<AttestationReply>(request.params.attestation_id, { op: 'unlock', caller: callerOf(principal) });
    const key = contentKeyOf(record);
    const data = aesGcmOpen(key, record.sealed.sealed_content, record.attestation_id).toString('utf8');
    // The reveal proves itself: the key matches its commitment and the content its hash.
    if (keyCommitment(record.attestation_id, key) !== record.key_commitment || contentHash(data) !== record.content_hash) {
      throw new Error(`attestation ${record.attestation_id}: the unsealed key or content does not match its commitment`);
    }
    const progress = unlockProgress(record, services.clock.now());
    const seed = record.sealed.sealed_lottery_seed ? requireSeal().unseal(record.sealed.sealed_lottery_seed, record.attestation_id).toString('base64') : null;
    return {
      attestation_id: record.attestation_id,
      message: 'The lock condition holds; the content is revealed.',
      revealed: { data, type: record.content_type },
      signatures_collected: progress.signatures_collected,
      signatures_required: progress.signatures_required,
      status: progress.status,
      unlock_method: record.unlock_method ?? record.lock.type,
      unlock_proof: {
        content_key: key.toString('base64'),
        key_commitment: record.key_commitment,
        content_hash: record.content_hash,
        merkle_root: record.lock_proof.merkle_root,
        lottery_seed: seed,
        lottery_winning_entry: record.lottery_winner === null ? null : record.lottery_winning_entry,
        signatures: record.witnesses.map((witness) => ({ signer: witness.signer, signature: witness.signature, signed_at: isoTime(witness.signed_at_ms)! })),
      },
      unlocked_at: isoTime(record.unlocked_at_ms)!,
    };
  });
}
