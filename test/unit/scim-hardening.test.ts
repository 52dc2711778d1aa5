import { describe, expect, it } from 'vitest';
import { World, WORLD_T0 } from '../helpers/flow-world.js';
import { fixedContext } from '../helpers/step.js';
import { DIRECTORY_KEY, DIRECTORY_KIND, USER_KIND } from '../../actors/accounts/messages.js';
import { ORGANIZATION_KIND } from '../../actors/organizations/messages.js';
import { flowCall, type FlowAnswer } from '../../actors/flow-call.js';
import {
  SCIM_CREATE_BURST,
  SCIM_CREATE_PER_SECOND,
  SCIM_DIRECTORY_KIND,
  takeToken,
  type ScimDirectoryMessage,
  type ScimFlowReply,
} from '../../actors/scim/messages.js';
import { loadScimDirectory, stepScimDirectory, type ScimDirectoryState } from '../../actors/scim/state.js';

/**
 * The identity hardening of SCIM (docs/api/scim.md): provisioning only in
 * the organization's verified domains, the per-organization creation rate,
 * and tokens bound to an expiry and to the credential that minted them.
 * Over HTTP: test/http/scim-hardening.test.ts.
 */

const ORG = 'org_1';
const OWNER = 'usr_owner';

function world(): World {
  const w = new World();
  expect(w.ask(ORGANIZATION_KIND, ORG, { op: 'create', org_id: ORG, name: 'BigCorp', slug: 'bigcorp', created_by: OWNER })).toHaveProperty('reply');
  w.delivered.length = 0;
  return w;
}

function verifyDomain(w: World, domain: string): void {
  expect(w.ask(ORGANIZATION_KIND, ORG, { op: 'add_domain', domain, token: 'tok1' })).toHaveProperty('reply');
  expect(w.ask(ORGANIZATION_KIND, ORG, { op: 'verify_domain', domain, txt: [['platform-verification=tok1']] })).toMatchObject({ reply: { status: 'verified' } });
  w.delivered.length = 0;
}

let counter = 0;
function provision(email: string, verified_domains_only = true): ScimDirectoryMessage {
  counter++;
  return {
    op: 'user-provision',
    scim_id: `scim_${counter}`,
    user_id: `usr_${counter}`,
    attributes: { userName: email, externalId: null, displayName: null, name: null, emails: [] },
    active: true,
    platform: { email, username: `u${counter}`, display_name: email, password_hash: '!unusable' },
    verified_domains_only,
  };
}

const directory = (w: World) => w.state<ScimDirectoryState>(SCIM_DIRECTORY_KIND, ORG);

describe('the creation bucket (actors/scim/rate.ts)', () => {
  const rule = { per_second: 5, burst: 3 };

  it('starts full, empties by one per take, then says when the next token is there', () => {
    let bucket = null;
    for (let i = 0; i < 3; i++) {
      const taken = takeToken(bucket, rule, 1000);
      expect(taken.ok).toBe(true);
      bucket = taken.bucket;
    }
    const refused = takeToken(bucket, rule, 1000);
    expect(refused).toEqual({ ok: false, bucket: { tokens: 0, at_ms: 1000 }, retry_after_ms: 200 });
    // 100 ms later half a token: 100 ms to go.
    expect(takeToken(bucket, rule, 1100)).toMatchObject({ ok: false, retry_after_ms: 100 });
    expect(takeToken(bucket, rule, 1200)).toMatchObject({ ok: true, bucket: { tokens: 0, at_ms: 1200 } });
  });

  it('refills up to the burst only, and a clock going back adds nothing', () => {
    expect(takeToken({ tokens: 0, at_ms: 1000 }, rule, 1_000_000)).toEqual({ ok: true, bucket: { tokens: 2, at_ms: 1_000_000 } });
    expect(takeToken({ tokens: 0.5, at_ms: 5000 }, rule, 1000)).toMatchObject({ ok: false, bucket: { tokens: 0.5, at_ms: 5000 } });
  });
});

describe('provisioning only in verified domains', () => {
  it('refuses an address outside the verified domains before anything is reserved or created (403)', () => {
    const w = world();
    const outcome = w.ask(SCIM_DIRECTORY_KIND, ORG, provision('admin@bigcorp.example'));
    expect(outcome).toMatchObject({ error: { code: 'forbidden', message: expect.stringContaining('bigcorp.example') } });
    // Only the question was asked: no user, no claim, no reservation.
    expect(w.calls()).toEqual(['organization:domain_verified']);
    expect(directory(w).users.size).toBe(0);
    expect(directory(w).byUserName.size).toBe(0);
    expect(directory(w).flows.size).toBe(0);
    expect(w.ask(DIRECTORY_KIND, DIRECTORY_KEY, { op: 'lookup', login: 'admin@bigcorp.example' })).toEqual({ reply: { user_id: null } });
  });

  it('provisions once the organization has verified the domain (case-insensitively); a subdomain is not covered', () => {
    const w = world();
    verifyDomain(w, 'bigcorp.example');
    const outcome = w.ask(SCIM_DIRECTORY_KIND, ORG, provision('Admin@BigCorp.Example'));
    expect((outcome as { reply: ScimFlowReply }).reply.user).toMatchObject({ userName: 'Admin@BigCorp.Example', active: true, pending_until_ms: null });
    expect(w.calls()).toEqual(['organization:domain_verified', 'user-directory:lookup', 'user-directory:claim', 'user:create', 'organization:add_member']);
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, provision('ops@eu.bigcorp.example'))).toMatchObject({ error: { code: 'forbidden' } });
  });

  it('with the rule off, nothing is asked of the organization', () => {
    const w = world();
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, provision('admin@bigcorp.example', false))).toHaveProperty('reply');
    expect(w.calls()[0]).toBe('user-directory:lookup');
  });

  it('a userName taken while the domain was asked about is uniqueness, with nothing reserved for the loser', () => {
    const w = world();
    verifyDomain(w, 'bigcorp.example');
    w.holding.add(ORGANIZATION_KIND);
    const first = w.nextRequestId();
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, provision('ada@bigcorp.example'))).toMatchObject({ error: { code: 'flow_interrupted' } });
    const second = w.nextRequestId();
    w.ask(SCIM_DIRECTORY_KIND, ORG, provision('ADA@bigcorp.example'));
    expect(directory(w).users.size).toBe(0);
    w.holding.delete(ORGANIZATION_KIND);
    w.drain();
    expect(w.answerOf(first)).toHaveProperty('reply');
    expect(w.answerOf(second)).toMatchObject({ error: { code: 'scim_uniqueness' } });
    expect(directory(w).users.size).toBe(1);
    expect(directory(w).flows.size).toBe(0);
  });

  it('an organization deleted meanwhile verifies nothing', () => {
    const w = world();
    expect(w.ask(SCIM_DIRECTORY_KIND, 'org_gone', provision('a@bigcorp.example'))).toMatchObject({ error: { code: 'forbidden' } });
  });
});

describe('the per-organization creation rate', () => {
  it(`lets ${SCIM_CREATE_BURST} creations through at once, then 429 with Retry-After until the bucket refills`, () => {
    const w = world();
    for (let i = 0; i < SCIM_CREATE_BURST; i++) expect(w.ask(SCIM_DIRECTORY_KIND, ORG, provision(`u${i}@acme.example`, false))).toHaveProperty('reply');
    let thrown: unknown;
    try {
      w.turn(SCIM_DIRECTORY_KIND, ORG, provision('late@acme.example', false), 'req-late');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code: 'rate_limited', retryAfterSeconds: Math.ceil(1 / SCIM_CREATE_PER_SECOND) });
    // Nothing was reserved for the refused one.
    expect(directory(w).byUserName.has('late@acme.example')).toBe(false);
    w.now += 1000 / SCIM_CREATE_PER_SECOND;
    expect(w.ask(SCIM_DIRECTORY_KIND, ORG, provision('late@acme.example', false))).toHaveProperty('reply');
    // Another organization has its own bucket.
    expect(w.ask(ORGANIZATION_KIND, 'org_2', { op: 'create', org_id: 'org_2', name: 'Other', slug: 'other', created_by: OWNER })).toHaveProperty('reply');
    expect(w.ask(SCIM_DIRECTORY_KIND, 'org_2', provision('x@other.example', false))).toHaveProperty('reply');
  });

  it('counts an attempt refused later (an unverified domain), not one refused at once (a userName in use); the bucket survives a reload', () => {
    const state = loadScimDirectory(ORG, []);
    const context = fixedContext(WORLD_T0, SCIM_DIRECTORY_KIND, ORG);
    const first = stepScimDirectory(state, provision('a@x.example'), { ...context, request_id: 'r1' });
    expect(first.writes).toContainEqual({ subkey: 'b:create', value: { tokens: SCIM_CREATE_BURST - 1, at_ms: WORLD_T0 } });
    const taken = stepScimDirectory(state, provision('b@x.example', false), { ...context, request_id: 'r2' });
    expect(state.create_bucket).toEqual({ tokens: SCIM_CREATE_BURST - 2, at_ms: WORLD_T0 });
    expect(() => stepScimDirectory(state, provision('B@x.example', false), { ...context, request_id: 'r3' })).toThrow(/already in use/);
    expect(state.create_bucket).toEqual({ tokens: SCIM_CREATE_BURST - 2, at_ms: WORLD_T0 });
    const records = [...(first.writes ?? []), ...(taken.writes ?? [])].filter((w) => w.value !== undefined).map((w) => [w.subkey, w.value] as [string, unknown]);
    expect(loadScimDirectory(ORG, records).create_bucket).toEqual({ tokens: SCIM_CREATE_BURST - 2, at_ms: WORLD_T0 });
  });
});

describe('tokens record what minted them', () => {
  it('token-verify hands the minting credential to the edge; a legacy token (none recorded) comes back with null', () => {
    const state = loadScimDirectory(ORG, [
      ['t:old', { id: 'old', name: 'Legacy', secret_hash: 'h0', created_by: OWNER, created_at_ms: 1, expires_at_ms: null }],
    ]);
    const context = fixedContext(WORLD_T0, SCIM_DIRECTORY_KIND, ORG);
    stepScimDirectory(state, { op: 'token-create', token_id: 'new', name: 'Okta', secret_hash: 'h1', created_by: OWNER, expires_at_ms: WORLD_T0 + 1000, minted_by: { kind: 'api_key', api_key_id: 'k1' } }, context);
    expect(stepScimDirectory(state, { op: 'token-verify', token_id: 'new', secret_hash: 'h1' }, context).reply).toEqual({ token_id: 'new', created_by: OWNER, minted_by: { kind: 'api_key', api_key_id: 'k1' } });
    expect(stepScimDirectory(state, { op: 'token-verify', token_id: 'old', secret_hash: 'h0' }, context).reply).toEqual({ token_id: 'old', created_by: OWNER, minted_by: null });
    expect(stepScimDirectory(state, { op: 'token-list' }, context).reply).toEqual([
      { id: 'old', name: 'Legacy', created_by: OWNER, created_at_ms: 1, expires_at_ms: null, minted_with: null },
      { id: 'new', name: 'Okta', created_by: OWNER, created_at_ms: WORLD_T0, expires_at_ms: WORLD_T0 + 1000, minted_with: 'api_key' },
    ]);
  });
});

describe('the relay of summaries to the user directory (ban-sync, rename-sync, delete-sync)', () => {
  // The user actor holds an admin change's reply until the directory has applied
  // the summary only for an ask (its request_id); a flow-call arrives through the
  // outbox (no request_id) and is answered in the same turn, carrying the summary.
  // So SCIM's relay is what makes the admin list show a SCIM ban once SCIM answers:
  // it stays until the user actor holds flow-call answers too.
  it('a flow-call ban is answered at once with the summary, not held for the directory', () => {
    const w = new World();
    w.ask(USER_KIND, 'usr_1', { op: 'create', user: { id: 'usr_1', email: 'a@x.example', username: 'a1', display_name: 'A', password_hash: '!', role: 'user' } });
    const result = w.turn(USER_KIND, 'usr_1', flowCall(USER_KIND, 'usr_1', { op: 'ban', reason: 'r', banned_by: 'scim:org_1' }, { kind: SCIM_DIRECTORY_KIND, key: ORG, flow_id: 'f1', step: 'ban' }).message);
    expect(result.defer).toBeUndefined();
    const answer = result.sends?.find((send) => send.kind === SCIM_DIRECTORY_KIND)?.message as FlowAnswer;
    expect(answer).toMatchObject({ op: 'flow-answer', ok: true, reply: { changed: true, sync: { op: 'sync', user_id: 'usr_1' } } });
    // The summary went to the directory without asking for an acknowledgement.
    expect(result.sends?.find((send) => send.kind === DIRECTORY_KIND)?.message).not.toHaveProperty('ack');
  });
});
