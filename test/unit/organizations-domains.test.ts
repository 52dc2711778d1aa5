import { describe, expect, it } from 'vitest';
import { organizationActors } from '../../actors/organizations/actor.js';
import type { OrgDomainState } from '../../actors/organizations/domain-index-state.js';
import { stepOrganizationFlows } from '../../actors/organizations/flows.js';
import {
  emailDomain,
  ORG_DOMAIN_KIND,
  ORG_DOMAINS_MAX,
  ORGANIZATION_KIND,
  parseDomain,
  txtHolds,
  verificationRecordName,
  verificationRecordValue,
  type DomainView,
  type OrganizationMessage,
} from '../../actors/organizations/messages.js';
import type { OrganizationState } from '../../actors/organizations/state.js';
import { isServiceError } from '../../runtime/index.js';
import { actorWorld, callOf, type Delivery } from '../helpers/actor-world.js';
import { fixedContext } from '../helpers/step.js';

/**
 * Verified domains of an organization (actors/organizations/domains.ts, the
 * organization's domain ops and its verification flow, the `org-domain`
 * index), step by step in a pure actor world.
 */
const T0 = 1_700_000_000_000;
const by = (user_id: string) => ({ user_id, platform_admin: false });
const world = () => actorWorld(organizationActors, T0);
const isOp = (kind: string, op: string) => (d: Delivery) => d.kind === kind && callOf(d).op === op;

type World = ReturnType<typeof world>;

/** An organization owned by `owner`, with `admin` and `member` members. */
function orgWith(w: World, org_id: string, owner = 'u1'): void {
  w.reply(ORGANIZATION_KIND, org_id, { op: 'create', org_id, name: `Org ${org_id}`, slug: org_id.replace('_', '-'), created_by: owner, capped: true } satisfies OrganizationMessage);
  w.reply(ORGANIZATION_KIND, org_id, { op: 'add_member', user_id: `${org_id}-admin`, role: 'admin' });
  w.reply(ORGANIZATION_KIND, org_id, { op: 'add_member', user_id: `${org_id}-member`, role: 'member' });
}

const add = (w: World, org_id: string, domain: string, token = 'tok1', user = 'u1') =>
  w.ask(ORGANIZATION_KIND, org_id, { op: 'add_domain', domain, token, by: by(user) } satisfies OrganizationMessage);
const txtFor = (token: string) => [['v=spf1 -all'], ['platform-verif', `ication=${token}`]];
const verify = (w: World, org_id: string, domain: string, txt: string[][], user = 'u1') =>
  w.ask(ORGANIZATION_KIND, org_id, { op: 'verify_domain', domain, txt, by: by(user) } satisfies OrganizationMessage);
/** The organization that holds the domain (an ask: delivers whatever is queued first). */
const owner = (w: World, domain: string) => w.reply(ORG_DOMAIN_KIND, domain, { op: 'get' }).org_id;
const verified = (w: World, org_id: string, domain: string) => w.reply(ORGANIZATION_KIND, org_id, { op: 'domain_verified', domain }).verified;

describe('parseDomain', () => {
  it('accepts DNS names of two labels or more, lower-cased', () => {
    expect(parseDomain('Example.COM')).toEqual({ ok: true, domain: 'example.com' });
    expect(parseDomain('mail.eu.example.co.uk')).toEqual({ ok: true, domain: 'mail.eu.example.co.uk' });
    expect(parseDomain('xn--bcher-kva.example')).toEqual({ ok: true, domain: 'xn--bcher-kva.example' });
    expect(parseDomain('3com.com')).toEqual({ ok: true, domain: '3com.com' });
    expect(parseDomain(`${'a'.repeat(63)}.com`).ok).toBe(true);
    const longest = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(57)}.com`;
    expect(longest.length).toBe(253);
    expect(parseDomain(longest).ok).toBe(true);
  });

  it('refuses what is not a domain', () => {
    for (const bad of [
      '',
      'localhost',
      'example.com.',
      '.example.com',
      'example..com',
      '-example.com',
      'example-.com',
      'ex_ample.com',
      'exa mple.com',
      ' example.com',
      'bücher.example',
      `${'a'.repeat(64)}.com`,
      `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(58)}.com`,
      '192.168.1.1',
      '10.0.0.1',
      '::1',
      '[::1]',
      '2001:db8::1',
      'user@example.com',
      'example.com/path',
      'https://example.com',
    ]) {
      expect(parseDomain(bad), bad).toMatchObject({ ok: false, reason: expect.any(String) });
    }
  });
});

describe('emailDomain and txtHolds', () => {
  it('gives the lower-cased part after the last @', () => {
    expect(emailDomain('Ann@Example.COM')).toBe('example.com');
    expect(emailDomain('"a@b"@corp.example')).toBe('corp.example');
    expect(emailDomain('no-at-sign')).toBeNull();
    expect(emailDomain('trailing@')).toBeNull();
  });

  it('joins each record\'s strings and compares exactly', () => {
    const value = verificationRecordValue('abc');
    expect(value).toBe('platform-verification=abc');
    expect(verificationRecordName('example.com')).toBe('_platform-verification.example.com');
    expect(txtHolds([['platform-verification=', 'abc']], value)).toBe(true);
    expect(txtHolds([[' platform-verification=abc ']], value)).toBe(true);
    expect(txtHolds([['platform-verification=abcd']], value)).toBe(false);
    expect(txtHolds([['platform-verification=ABC']], value)).toBe(false);
    expect(txtHolds([['platform-verification='], ['abc']], value)).toBe(false);
    expect(txtHolds([], value)).toBe(false);
  });
});

describe('adding and listing domains', () => {
  it('adds a pending domain with its TXT record; adding it again returns it unchanged', () => {
    const w = world();
    orgWith(w, 'org_1');
    const first = add(w, 'org_1', 'Acme.example', 'tok1');
    expect(first.reply).toEqual({
      created: true,
      domain: {
        domain: 'acme.example',
        status: 'pending',
        method: 'dns_txt',
        record_name: '_platform-verification.acme.example',
        record_value: 'platform-verification=tok1',
        created_at_ms: T0,
        verified_at_ms: null,
      },
    });
    w.advance(1000);
    const again = add(w, 'org_1', 'acme.example', 'tok2');
    expect(again.reply).toEqual({ created: false, domain: first.reply.domain });
    expect(w.records(ORGANIZATION_KIND, 'org_1').get('d:acme.example')).toMatchObject({ token: 'tok1', status: 'pending' });
    // Nothing reaches the index before verification.
    expect(w.log.some((d) => d.kind === ORG_DOMAIN_KIND)).toBe(false);
  });

  it('owners and admins add, members list, strangers see nothing', () => {
    const w = world();
    orgWith(w, 'org_1');
    expect(add(w, 'org_1', 'a.example', 't', 'org_1-admin').reply.created).toBe(true);
    expect(add(w, 'org_1', 'b.example', 't', 'org_1-member').code).toBe('forbidden');
    expect(add(w, 'org_1', 'b.example', 't', 'stranger').code).toBe('not_found');
    expect(w.reply(ORGANIZATION_KIND, 'org_1', { op: 'list_domains', by: by('org_1-member') }).domains.map((d: DomainView) => d.domain)).toEqual(['a.example']);
    expect(w.code(ORGANIZATION_KIND, 'org_1', { op: 'list_domains', by: by('stranger') })).toBe('not_found');
    expect(w.code(ORGANIZATION_KIND, 'org_1', { op: 'get_domain', domain: 'a.example', by: by('org_1-member') })).toBe('forbidden');
    expect(w.code(ORGANIZATION_KIND, 'org_1', { op: 'get_domain', domain: 'z.example', by: by('u1') })).toBe('not_found');
    // The actor validates too (a trusted caller that skipped the edge).
    expect(add(w, 'org_1', '10.0.0.1', 't').code).toBe('BAD_REQUEST');
  });

  it(`holds at most ${ORG_DOMAINS_MAX} domains; the same domain again still answers`, () => {
    const w = world();
    orgWith(w, 'org_1');
    for (let i = 0; i < ORG_DOMAINS_MAX; i++) expect(add(w, 'org_1', `d${i}.example`).reply.created).toBe(true);
    expect(add(w, 'org_1', 'one-more.example').code).toBe('conflict');
    expect(add(w, 'org_1', 'd0.example').reply.created).toBe(false);
    w.reply(ORGANIZATION_KIND, 'org_1', { op: 'remove_domain', domain: 'd0.example', by: by('u1') });
    expect(add(w, 'org_1', 'one-more.example').reply.created).toBe(true);
  });
});

describe('verification', () => {
  it('compares what DNS showed with the expected value: no match changes nothing and names the record', () => {
    const w = world();
    orgWith(w, 'org_1');
    add(w, 'org_1', 'acme.example', 'tok1');
    expect(verify(w, 'org_1', 'acme.example', [['platform-verification=wrong']]).code).toBe('domain_not_verified');
    expect(verify(w, 'org_1', 'acme.example', []).code).toBe('domain_not_verified');
    expect(w.records(ORGANIZATION_KIND, 'org_1').get('d:acme.example')).toMatchObject({ status: 'pending' });
    expect(w.log.some((d) => d.kind === ORG_DOMAIN_KIND)).toBe(false);

    // The error's details, from the step itself.
    const state = w.state<OrganizationState>(ORGANIZATION_KIND, 'org_1');
    let thrown: unknown;
    try {
      stepOrganizationFlows(state, { op: 'verify_domain', domain: 'acme.example', txt: [['v=spf1 -all']], by: by('u1') }, fixedContext(T0, ORGANIZATION_KIND, 'org_1'));
    } catch (error) {
      thrown = error;
    }
    expect(isServiceError(thrown) && thrown.code).toBe('domain_not_verified');
    expect((thrown as { details: unknown }).details).toEqual({
      method: 'dns_txt',
      record_name: '_platform-verification.acme.example',
      record_value: 'platform-verification=tok1',
      found: ['v=spf1 -all'],
    });
  });

  it('a match claims the domain in org-domain, then answers verified', () => {
    const w = world();
    orgWith(w, 'org_1');
    add(w, 'org_1', 'acme.example', 'tok1');
    w.advance(5000);
    const ask = w.send(ORGANIZATION_KIND, 'org_1', { op: 'verify_domain', domain: 'ACME.example', txt: txtFor('tok1'), by: by('org_1-admin') });
    expect(ask.outcome()).toEqual({ deferred: true });
    expect(w.queue).toEqual([
      {
        kind: ORG_DOMAIN_KIND,
        key: 'acme.example',
        message: { op: 'flow-call', call: { op: 'claim', org_id: 'org_1' }, reply_to: { kind: ORGANIZATION_KIND, key: 'org_1', flow_id: expect.any(String), step: 'domain' } },
      },
    ]);
    w.deliverNext(); // the index claims
    expect(w.state<OrgDomainState>(ORG_DOMAIN_KIND, 'acme.example').owner).toEqual({ org_id: 'org_1', claimed_at_ms: T0 + 5000 });
    expect(ask.outcome().deferred).toBe(true);
    expect(w.queue).toEqual([
      { kind: ORGANIZATION_KIND, key: 'org_1', message: { op: 'flow-answer', flow_id: expect.any(String), step: 'domain', ok: true, reply: { claimed: true, domain: 'acme.example' } } },
    ]);
    w.deliverNext(); // the flow-answer
    expect(ask.outcome()).toEqual({ reply: expect.objectContaining({ domain: 'acme.example', status: 'verified', verified_at_ms: T0 + 5000 }), deferred: false });
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_1').flows.size).toBe(0);
    expect(verified(w, 'org_1', 'acme.example')).toBe(true);
    expect(verified(w, 'org_1', 'Acme.Example')).toBe(true);
    expect(verified(w, 'org_1', 'sub.acme.example')).toBe(false);
    // Verifying again answers at once, unchanged (even with the record gone from DNS).
    w.advance(1000);
    expect(verify(w, 'org_1', 'acme.example', []).reply).toMatchObject({ status: 'verified', verified_at_ms: T0 + 5000 });
    // Survives a reload.
    w.reload(ORGANIZATION_KIND, 'org_1');
    expect(verified(w, 'org_1', 'acme.example')).toBe(true);
  });

  it('one organization per domain: the second gets domain_taken and stays pending', () => {
    const w = world();
    orgWith(w, 'org_1');
    orgWith(w, 'org_2', 'u2');
    add(w, 'org_1', 'acme.example', 'tok1');
    add(w, 'org_2', 'acme.example', 'tok2', 'u2');
    expect(verify(w, 'org_1', 'acme.example', txtFor('tok1')).reply.status).toBe('verified');
    // org_2 published its own record too (both values can be in DNS at once).
    expect(verify(w, 'org_2', 'acme.example', [...txtFor('tok1'), ...txtFor('tok2')], 'u2').code).toBe('domain_taken');
    expect(w.records(ORGANIZATION_KIND, 'org_2').get('d:acme.example')).toMatchObject({ status: 'pending', verified_at_ms: null });
    expect(owner(w, 'acme.example')).toBe('org_1');
    expect(verified(w, 'org_2', 'acme.example')).toBe(false);
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_2').flows.size).toBe(0);
    // The index refused through the flow-call envelope: an answer with ok: false.
    expect(w.log.filter((d) => d.kind === ORGANIZATION_KIND && d.key === 'org_2' && d.message.op === 'flow-answer' && d.message.step === 'domain').map((d) => d.message)).toEqual([
      { op: 'flow-answer', flow_id: expect.any(String), step: 'domain', ok: false, error: { code: 'domain_taken', message: 'The domain "acme.example" is verified by another organization.' } },
    ]);
  });

  it('another area cannot run the verification flow through a flow-call', () => {
    const w = world();
    orgWith(w, 'org_1');
    add(w, 'org_1', 'acme.example', 'tok1');
    const state = w.state<OrganizationState>(ORGANIZATION_KIND, 'org_1');
    const reply_to = { kind: 'scim-directory', key: 'org_1', flow_id: 'f', step: 'x' };
    let thrown: unknown;
    try {
      stepOrganizationFlows(state, { op: 'flow-call', call: { op: 'verify_domain', domain: 'acme.example', txt: txtFor('tok1') }, reply_to }, fixedContext(T0, ORGANIZATION_KIND, 'org_1'));
    } catch (error) {
      thrown = error;
    }
    expect(isServiceError(thrown) && thrown.code).toBe('BAD_REQUEST');
  });

  it('two verifications racing for one domain: exactly one organization gets it', () => {
    const w = world();
    orgWith(w, 'org_1');
    orgWith(w, 'org_2', 'u2');
    add(w, 'org_1', 'acme.example', 'tok1');
    add(w, 'org_2', 'acme.example', 'tok2', 'u2');
    const first = w.send(ORGANIZATION_KIND, 'org_1', { op: 'verify_domain', domain: 'acme.example', txt: txtFor('tok1'), by: by('u1') });
    const second = w.send(ORGANIZATION_KIND, 'org_2', { op: 'verify_domain', domain: 'acme.example', txt: txtFor('tok2'), by: by('u2') });
    w.drain();
    expect([first.outcome(), second.outcome()].map((o) => o.code ?? o.reply.status).sort()).toEqual(['domain_taken', 'verified']);
    expect(owner(w, 'acme.example')).toBe('org_1');
  });

  it('a claim delivered twice is applied once and answered the same', () => {
    const w = world();
    orgWith(w, 'org_1');
    add(w, 'org_1', 'acme.example', 'tok1');
    const ask = w.send(ORGANIZATION_KIND, 'org_1', { op: 'verify_domain', domain: 'acme.example', txt: txtFor('tok1'), by: by('u1') });
    const claim = w.queue[0];
    w.inject(claim.kind, claim.key, claim.message); // a redelivery
    w.drain();
    expect(ask.outcome().reply.status).toBe('verified');
    expect(owner(w, 'acme.example')).toBe('org_1');
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_1').flows.size).toBe(0);
  });
});

describe('removal', () => {
  it('removing a verified domain releases the claim (awaited) and frees it for another organization', () => {
    const w = world();
    orgWith(w, 'org_1');
    orgWith(w, 'org_2', 'u2');
    add(w, 'org_1', 'acme.example', 'tok1');
    verify(w, 'org_1', 'acme.example', txtFor('tok1'));
    const ask = w.send(ORGANIZATION_KIND, 'org_1', { op: 'remove_domain', domain: 'acme.example', by: by('org_1-admin') });
    expect(ask.outcome()).toEqual({ deferred: true });
    expect(w.queue.map((d) => [d.kind, d.key, callOf(d).op, d.message.reply_to?.step])).toEqual([[ORG_DOMAIN_KIND, 'acme.example', 'release', 'ack']]);
    w.drain();
    expect(ask.outcome()).toEqual({ reply: { removed: true }, deferred: false });
    expect(owner(w, 'acme.example')).toBeNull();
    expect(verified(w, 'org_1', 'acme.example')).toBe(false);
    expect(w.records(ORGANIZATION_KIND, 'org_1').has('d:acme.example')).toBe(false);
    add(w, 'org_2', 'acme.example', 'tok2', 'u2');
    expect(verify(w, 'org_2', 'acme.example', txtFor('tok2'), 'u2').reply.status).toBe('verified');
    expect(owner(w, 'acme.example')).toBe('org_2');
  });

  it('a release from an organization that does not hold the domain changes nothing', () => {
    const w = world();
    orgWith(w, 'org_1');
    orgWith(w, 'org_2', 'u2');
    add(w, 'org_1', 'acme.example', 'tok1');
    add(w, 'org_2', 'acme.example', 'tok2', 'u2');
    verify(w, 'org_1', 'acme.example', txtFor('tok1'));
    expect(w.reply(ORGANIZATION_KIND, 'org_2', { op: 'remove_domain', domain: 'acme.example', by: by('u2') })).toEqual({ removed: true });
    expect(owner(w, 'acme.example')).toBe('org_1');
  });

  it('members cannot remove; unknown domains are not_found; a domain being claimed waits', () => {
    const w = world();
    orgWith(w, 'org_1');
    add(w, 'org_1', 'acme.example', 'tok1');
    expect(w.code(ORGANIZATION_KIND, 'org_1', { op: 'remove_domain', domain: 'acme.example', by: by('org_1-member') })).toBe('forbidden');
    expect(w.code(ORGANIZATION_KIND, 'org_1', { op: 'remove_domain', domain: 'other.example', by: by('u1') })).toBe('not_found');
    const ask = w.send(ORGANIZATION_KIND, 'org_1', { op: 'verify_domain', domain: 'acme.example', txt: txtFor('tok1'), by: by('u1') });
    expect(w.send(ORGANIZATION_KIND, 'org_1', { op: 'remove_domain', domain: 'acme.example', by: by('u1') }).outcome().code).toBe('conflict');
    w.drain();
    expect(ask.outcome().reply.status).toBe('verified');
    expect(w.code(ORGANIZATION_KIND, 'org_1', { op: 'remove_domain', domain: 'acme.example', by: by('u1') })).toBeUndefined();
  });

  it('deleting the organization releases its claims', () => {
    const w = world();
    orgWith(w, 'org_1');
    add(w, 'org_1', 'a.example', 'tok1');
    add(w, 'org_1', 'b.example', 'tok1');
    verify(w, 'org_1', 'a.example', txtFor('tok1'));
    verify(w, 'org_1', 'b.example', txtFor('tok1'));
    expect(w.reply(ORGANIZATION_KIND, 'org_1', { op: 'delete', by: by('u1') })).toEqual({ deleted: true });
    expect(owner(w, 'a.example')).toBeNull();
    expect(owner(w, 'b.example')).toBeNull();
    expect(verified(w, 'org_1', 'a.example')).toBe(false);
    expect([...w.records(ORGANIZATION_KIND, 'org_1').keys()].filter((k) => k.startsWith('d:'))).toEqual([]);
  });

  it('compensation: a claim that lands after the organization was deleted is released again', () => {
    const w = world();
    orgWith(w, 'org_1');
    add(w, 'org_1', 'acme.example', 'tok1');
    const ask = w.send(ORGANIZATION_KIND, 'org_1', { op: 'verify_domain', domain: 'acme.example', txt: txtFor('tok1'), by: by('u1') });
    const claim = w.discard(isOp(ORG_DOMAIN_KIND, 'claim')); // held back in the outbox
    const deleted = w.send(ORGANIZATION_KIND, 'org_1', { op: 'delete', by: by('u1') });
    w.drain(); // the delete's release arrives first (nothing to release yet)
    expect(deleted.outcome().reply).toEqual({ deleted: true });
    w.inject(claim.kind, claim.key, claim.message); // then the claim: the index gives it to the dead organization
    expect(w.state<OrgDomainState>(ORG_DOMAIN_KIND, 'acme.example').owner?.org_id).toBe('org_1');
    w.drain(); // the flow-answer -> release
    expect(owner(w, 'acme.example')).toBeNull();
    expect(ask.outcome().code).toBe('not_found');
    expect(w.state<OrganizationState>(ORGANIZATION_KIND, 'org_1').flows.size).toBe(0);
  });

  it('domain_verified is false for an unknown organization', () => {
    const w = world();
    expect(verified(w, 'org_nobody', 'acme.example')).toBe(false);
  });
});
