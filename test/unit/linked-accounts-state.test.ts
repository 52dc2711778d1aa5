import { describe, expect, it } from 'vitest';
import { initialIdentityIndex, initialIdentityLinks, stepIdentityIndex, stepIdentityLinks, type IdentityIndexState, type IdentityLinksState } from '../../actors/linked-accounts/state.js';
import { identityIndexKey, type IdentityIndexMessage, type IdentityLinksMessage, type LinkRecord } from '../../actors/linked-accounts/messages.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** Pure step tests: a user's linked accounts, and the index that keeps an external identity on one user. */
const T0 = Date.UTC(2026, 0, 1);
const github = { provider: 'github', subject: 'gh-42', provider_display_name: 'GitHub', provider_email: 'ada@example.com' };

describe('identity links (per user)', () => {
  const run = (state: IdentityLinksState, message: IdentityLinksMessage, now = T0) => stepIdentityLinks(state, message, fixedContext(now, 'identity-links', 'usr_1'));

  it('adds one link per provider; a retried add returns the same link', () => {
    const added = run(initialIdentityLinks(), { op: 'add', ...github });
    const link = added.reply as LinkRecord;
    expect(link).toMatchObject({ provider: 'github', subject: 'gh-42', linked_at_ms: T0 });
    expect(run(added.state, { op: 'add', ...github }).reply).toEqual(link);
    expect(codeOf(() => run(added.state, { op: 'add', ...github, subject: 'gh-43' }))).toBe('account_already_linked');
  });

  it('remove releases the index claim through the outbox; an unknown provider is not_found', () => {
    const added = run(initialIdentityLinks(), { op: 'add', ...github });
    const removed = run(added.state, { op: 'remove', provider: 'github' });
    expect(removed.state.links).toEqual([]);
    expect(removed.sends).toEqual([{ kind: 'identity-index', key: identityIndexKey('github', 'gh-42'), message: { op: 'release', user_id: 'usr_1' } }]);
    expect(codeOf(() => run(removed.state, { op: 'remove', provider: 'github' }))).toBe('not_found');
  });

  it('lists links oldest first', () => {
    let state = run(initialIdentityLinks(), { op: 'add', ...github }, T0 + 5).state;
    state = run(state, { op: 'add', ...github, provider: 'gitlab', subject: 'gl-1' }, T0 + 1).state;
    expect((run(state, { op: 'list' }).reply as LinkRecord[]).map((l) => l.provider)).toEqual(['gitlab', 'github']);
  });
});

describe('identity index (per external identity)', () => {
  const run = (state: IdentityIndexState, message: IdentityIndexMessage) => stepIdentityIndex(state, message, fixedContext(T0, 'identity-index', 'k'));

  it('one holder at a time; a stale holder can be replaced; only the holder releases', () => {
    const claimed = run(initialIdentityIndex(), { op: 'claim', user_id: 'usr_1' });
    expect(claimed.reply).toEqual({ claimed: true, held_by: 'usr_1' });
    expect(run(claimed.state, { op: 'claim', user_id: 'usr_2' }).reply).toEqual({ claimed: false, held_by: 'usr_1' });
    expect(run(claimed.state, { op: 'claim', user_id: 'usr_2', replaces: 'usr_1' }).reply).toEqual({ claimed: true, held_by: 'usr_2' });
    expect(run(claimed.state, { op: 'release', user_id: 'usr_2' }).reply).toEqual({ released: false });
    expect(run(claimed.state, { op: 'release', user_id: 'usr_1' }).state).toEqual(initialIdentityIndex());
  });
});
