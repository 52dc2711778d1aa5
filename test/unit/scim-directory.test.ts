import { describe, expect, it } from 'vitest';
import { errorCodes, ServiceError, type RecordWrite } from '../../runtime/index.js';
import { parseFilter } from '../../actors/scim/filter.js';
import { parsePatch } from '../../actors/scim/patch.js';
import { loadScimDirectory, stepScimDirectory, type ScimDirectoryState } from '../../actors/scim/state.js';
import { SCIM_PENDING_LEASE_MS, type ScimAttributes, type ScimDirectoryMessage, type ScimUserPage, type ScimUserRecord } from '../../actors/scim/messages.js';
import { fixedContext } from '../helpers/step.js';

const T0 = 1_700_000_000_000;

function attrs(userName: string, extra: Partial<ScimAttributes> = {}): ScimAttributes {
  return { userName, externalId: null, displayName: null, name: null, emails: [], ...extra };
}

/** Runs a turn and replays its writes into a record map, so load() can rebuild the state. */
function harness() {
  const records = new Map<string, unknown>();
  let state: ScimDirectoryState = loadScimDirectory('org', []);
  return {
    step<T>(message: ScimDirectoryMessage, now = T0): T {
      const result = stepScimDirectory(state, message, fixedContext(now, 'scim-directory', 'org'));
      state = result.state;
      for (const write of (result.writes ?? []) as RecordWrite[]) {
        if (write.value === undefined) records.delete(write.subkey);
        else records.set(write.subkey, structuredClone(write.value));
      }
      return result.reply as T;
    },
    reload() {
      state = loadScimDirectory('org', [...records.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
    },
    get state() {
      return state;
    },
  };
}

function scimTypeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    if (error instanceof ServiceError) return (errorCodes[error.code] as { wire?: string }).wire ?? error.code;
    throw error;
  }
  return undefined;
}

function create(h: ReturnType<typeof harness>, scim_id: string, userName: string, now = T0): ScimUserRecord {
  h.step({ op: 'user-reserve', scim_id, user_id: `usr_${scim_id}`, attributes: attrs(userName) }, now);
  return h.step<ScimUserRecord>({ op: 'user-activate', scim_id, active: true }, now);
}

describe('scim-directory step', () => {
  it('reserves, activates, lists and survives a reload', () => {
    const h = harness();
    const reserved = h.step<{ user: ScimUserRecord; resumed: boolean }>({ op: 'user-reserve', scim_id: 's1', user_id: 'u1', attributes: attrs('Ada@x.org') });
    expect(reserved.resumed).toBe(false);
    // Pending users are invisible.
    expect(scimTypeOf(() => h.step({ op: 'user-get', scim_id: 's1' }))).toBe('not_found');
    expect(h.step<ScimUserPage>({ op: 'user-list', filter: null, start_index: 1, count: 10 }).total).toBe(0);
    const active = h.step<ScimUserRecord>({ op: 'user-activate', scim_id: 's1', active: true });
    expect(active).toMatchObject({ id: 's1', user_id: 'u1', active: true, pending_until_ms: null });
    h.reload();
    expect(h.step<ScimUserRecord>({ op: 'user-get', scim_id: 's1' }).userName).toBe('Ada@x.org');
    // userName is unique case-insensitively, also after the reload.
    expect(scimTypeOf(() => h.step({ op: 'user-reserve', scim_id: 's2', user_id: 'u2', attributes: attrs('ADA@X.ORG') }))).toBe('uniqueness');
  });

  it('holds a pending userName for its lease, then lets a retry resume it with the same ids', () => {
    const h = harness();
    h.step({ op: 'user-reserve', scim_id: 's1', user_id: 'u1', attributes: attrs('kim') });
    expect(scimTypeOf(() => h.step({ op: 'user-reserve', scim_id: 's2', user_id: 'u2', attributes: attrs('kim') }, T0 + 1000))).toBe('uniqueness');
    const resumed = h.step<{ user: ScimUserRecord; resumed: boolean }>(
      { op: 'user-reserve', scim_id: 's3', user_id: 'u3', attributes: attrs('Kim', { displayName: 'Kim' }) },
      T0 + SCIM_PENDING_LEASE_MS + 1,
    );
    expect(resumed).toMatchObject({ resumed: true, user: { id: 's1', user_id: 'u1', displayName: 'Kim' } });
    // An abort frees the name.
    expect(h.step({ op: 'user-abort', scim_id: 's1' })).toEqual({ aborted: true });
    expect(h.step<{ resumed: boolean }>({ op: 'user-reserve', scim_id: 's4', user_id: 'u4', attributes: attrs('kim') }).resumed).toBe(false);
  });

  it('filters and pages in creation order', () => {
    const h = harness();
    for (let i = 1; i <= 5; i++) create(h, `s${i}`, `user${i}`, T0 + i);
    const page = h.step<ScimUserPage>({ op: 'user-list', filter: parseFilter('userName sw "user" and not (userName eq "user1")'), start_index: 2, count: 2 });
    expect(page.total).toBe(4);
    expect(page.users.map((u) => u.id)).toEqual(['s3', 's4']);
    expect(h.step<ScimUserPage>({ op: 'user-list', filter: null, start_index: 1, count: 0 })).toEqual({ total: 5, users: [] });
  });

  it('updates displayName and deactivates; refuses reactivation', () => {
    const h = harness();
    create(h, 's1', 'ada');
    const renamed = h.step<{ user: ScimUserRecord; displayName_changed: boolean; deactivated: boolean }>(
      { op: 'user-update', scim_id: 's1', ...parsePatch({ Operations: [{ op: 'replace', path: 'displayName', value: 'Ada' }] }) },
      T0 + 5,
    );
    expect(renamed).toMatchObject({ displayName_changed: true, deactivated: false, user: { displayName: 'Ada', updated_at_ms: T0 + 5 } });
    const off = h.step<{ user: ScimUserRecord; deactivated: boolean }>({ op: 'user-update', scim_id: 's1', active: false }, T0 + 6);
    expect(off).toMatchObject({ deactivated: true, user: { active: false } });
    // Again: still reports the deactivation (the edge repeats the ban), changes nothing.
    const again = h.step<{ user: ScimUserRecord; deactivated: boolean }>({ op: 'user-update', scim_id: 's1', active: false }, T0 + 7);
    expect(again).toMatchObject({ deactivated: true, user: { updated_at_ms: T0 + 6 } });
    expect(scimTypeOf(() => h.step({ op: 'user-update', scim_id: 's1', active: true }))).toBe('mutability');
    h.reload();
    expect(h.step<ScimUserRecord>({ op: 'user-get', scim_id: 's1' })).toMatchObject({ active: false, displayName: 'Ada' });
  });

  it('deletes users and frees their userName', () => {
    const h = harness();
    create(h, 's1', 'ada');
    expect(h.step<ScimUserRecord>({ op: 'user-delete', scim_id: 's1' }).id).toBe('s1');
    expect(scimTypeOf(() => h.step({ op: 'user-delete', scim_id: 's1' }))).toBe('not_found');
    h.reload();
    expect(h.state.users.size).toBe(0);
    expect(create(h, 's2', 'ADA').id).toBe('s2');
  });

  it('verifies tokens by hash and expiry; revoked tokens stop at once', () => {
    const h = harness();
    h.step({ op: 'token-create', token_id: 't1', name: 'Okta', secret_hash: 'hash-1', created_by: 'u', expires_at_ms: T0 + 1000, minted_by: { kind: 'api_key', api_key_id: 'k1' } });
    h.step({ op: 'token-create', token_id: 't2', name: 'Azure', secret_hash: 'hash-2', created_by: 'u', expires_at_ms: T0 + 5000, minted_by: { kind: 'session', session_id: 's1' } });
    expect(h.step({ op: 'token-verify', token_id: 't1', secret_hash: 'hash-1' }, T0 + 999)).toEqual({ token_id: 't1', created_by: 'u', minted_by: { kind: 'api_key', api_key_id: 'k1' } });
    expect(scimTypeOf(() => h.step({ op: 'token-verify', token_id: 't1', secret_hash: 'hash-1' }, T0 + 1000))).toBe('unauthorized');
    expect(scimTypeOf(() => h.step({ op: 'token-verify', token_id: 't2', secret_hash: 'hash-1' }))).toBe('unauthorized');
    const listed = h.step<{ id: string }[]>({ op: 'token-list' });
    expect(listed.map((x) => x.id)).toEqual(['t1', 't2']);
    expect(JSON.stringify(listed)).not.toContain('hash-');
    h.step({ op: 'token-revoke', token_id: 't2' });
    h.reload();
    expect(scimTypeOf(() => h.step({ op: 'token-verify', token_id: 't2', secret_hash: 'hash-2' }))).toBe('unauthorized');
    expect(scimTypeOf(() => h.step({ op: 'token-revoke', token_id: 't2' }))).toBe('not_found');
  });
});

describe('SCIM PATCH parsing', () => {
  const ops = (...operations: unknown[]) => ({ schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'], Operations: operations });
  it('reads the Okta and Azure AD forms', () => {
    expect(parsePatch(ops({ op: 'replace', value: { active: false } }))).toEqual({ active: false });
    expect(parsePatch(ops({ op: 'Replace', path: 'active', value: 'False' }))).toEqual({ active: false });
    expect(parsePatch(ops({ op: 'replace', path: 'urn:ietf:params:scim:schemas:core:2.0:User:displayName', value: 'New' }))).toEqual({ displayName: 'New' });
    expect(parsePatch(ops({ op: 'Add', path: 'DisplayName', value: 'A' }, { op: 'replace', path: 'displayName', value: 'B' }))).toEqual({ displayName: 'B' });
    expect(parsePatch({ Operations: [{ op: 'replace', value: { DisplayName: 'x', Active: 'true' } }] })).toEqual({ displayName: 'x', active: true });
  });
  it('refuses everything else with a scimType', () => {
    const type = (body: unknown) => scimTypeOf(() => parsePatch(body));
    expect(type(ops({ op: 'remove', path: 'displayName' }))).toBe('mutability');
    expect(type(ops({ op: 'replace', path: 'userName', value: 'x' }))).toBe('mutability');
    expect(type(ops({ op: 'replace', path: 'name.givenName', value: 'x' }))).toBe('mutability');
    expect(type(ops({ op: 'replace', path: 'emails[type eq "work"].value', value: 'x' }))).toBe('mutability');
    expect(type(ops({ op: 'replace', path: 'title', value: 'x' }))).toBe('invalidPath');
    expect(type(ops({ op: 'copy', path: 'displayName', value: 'x' }))).toBe('invalidSyntax');
    expect(type(ops({ op: 'replace', path: 'active', value: 'yes' }))).toBe('invalidValue');
    expect(type(ops({ op: 'replace', path: 'active' }))).toBe('invalidValue');
    expect(type(ops({ op: 'replace', value: 'x' }))).toBe('invalidValue');
    expect(type(ops())).toBe('invalidSyntax');
    expect(type({ schemas: ['x'], Operations: [{ op: 'replace', path: 'active', value: false }] })).toBe('invalidSyntax');
    expect(type([])).toBe('invalidSyntax');
  });
});
