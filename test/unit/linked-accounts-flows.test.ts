import { describe, expect, it } from 'vitest';
import { USER_KIND } from '../../actors/accounts/messages.js';
import { IDENTITY_INDEX_KIND, IDENTITY_LINKS_KIND, identityIndexKey, type IdentityLinksMessage, type LinkRecord } from '../../actors/linked-accounts/messages.js';
import type { IdentityLinksState } from '../../actors/linked-accounts/state.js';
import { World } from '../helpers/flow-world.js';

/** The link flow (actors/linked-accounts/flows.ts) through the real step functions (test/helpers/flow-world.ts). */
const github = { provider: 'github', subject: 'gh-42', provider_display_name: 'GitHub', provider_email: 'ada@example.com' };
const link = (fields: Partial<typeof github> = {}): IdentityLinksMessage => ({ op: 'link', ...github, ...fields });

function withUser(w: World, user_id: string): void {
  const created = w.ask(USER_KIND, user_id, { op: 'create', user: { id: user_id, email: `${user_id}@x.example`, username: user_id, display_name: user_id, role: 'user', password_hash: 'x' } });
  expect(created).toHaveProperty('reply');
}

describe('link flow', () => {
  it('claims the identity, then adds the link: one ask, answered with the link', () => {
    const w = new World();
    const linked = w.ask(IDENTITY_LINKS_KIND, 'usr_a', link());
    expect(linked).toMatchObject({ reply: { provider: 'github', subject: 'gh-42' } });
    expect(w.calls()).toEqual(['identity-index:claim']);
    expect(w.ask(IDENTITY_INDEX_KIND, identityIndexKey('github', 'gh-42'), { op: 'get' })).toEqual({ reply: { user_id: 'usr_a' } });
    expect(Object.keys(w.state<IdentityLinksState>(IDENTITY_LINKS_KIND, 'usr_a').flows ?? {})).toEqual([]);
    // Again for the holder: the same link.
    expect(w.ask(IDENTITY_LINKS_KIND, 'usr_a', link())).toEqual(linked);
  });

  it('refuses an identity a live user holds, after checking that user and its link', () => {
    const w = new World();
    withUser(w, 'usr_a');
    w.ask(IDENTITY_LINKS_KIND, 'usr_a', link());
    w.delivered.length = 0;
    expect(w.ask(IDENTITY_LINKS_KIND, 'usr_b', link())).toEqual({ error: { code: 'account_already_linked', message: 'This GitHub account is already linked to another user.' } });
    expect(w.calls()).toEqual(['identity-index:claim', 'user:get', 'identity-links:get']);
    expect(w.state<IdentityLinksState>(IDENTITY_LINKS_KIND, 'usr_b').links).toEqual([]);
  });

  it('takes over a stale claim: a deleted holder, or a holder that unlinked (its release still in the outbox)', () => {
    const w = new World();
    w.ask(IDENTITY_LINKS_KIND, 'usr_gone', link()); // usr_gone has no user: deleted
    w.delivered.length = 0;
    expect(w.ask(IDENTITY_LINKS_KIND, 'usr_b', link())).toMatchObject({ reply: { subject: 'gh-42' } });
    expect(w.calls()).toEqual(['identity-index:claim', 'user:get', 'identity-index:claim']);

    withUser(w, 'usr_b');
    w.holding.add(IDENTITY_INDEX_KIND);
    expect(w.ask(IDENTITY_LINKS_KIND, 'usr_b', { op: 'remove', provider: 'github' })).toHaveProperty('reply');
    w.holding.clear();
    // The release is still queued when usr_c links: the claim is taken over, and the late release is ignored.
    const taken = w.ask(IDENTITY_LINKS_KIND, 'usr_c', link());
    expect(taken).toMatchObject({ reply: { subject: 'gh-42' } });
    expect(w.ask(IDENTITY_INDEX_KIND, identityIndexKey('github', 'gh-42'), { op: 'get' })).toEqual({ reply: { user_id: 'usr_c' } });
  });

  it('a second account of the same provider is refused by the add, and the claim is released (compensation)', () => {
    const w = new World();
    w.ask(IDENTITY_LINKS_KIND, 'usr_a', link());
    const second = w.ask(IDENTITY_LINKS_KIND, 'usr_a', link({ subject: 'gh-99' }));
    expect(second).toEqual({ error: { code: 'account_already_linked', message: 'This user already has a linked github account; unlink it first.' } });
    expect(w.ask(IDENTITY_INDEX_KIND, identityIndexKey('github', 'gh-99'), { op: 'get' })).toEqual({ reply: { user_id: null } });
    expect((w.state<IdentityLinksState>(IDENTITY_LINKS_KIND, 'usr_a').links as LinkRecord[]).map((l) => l.subject)).toEqual(['gh-42']);
  });
});
