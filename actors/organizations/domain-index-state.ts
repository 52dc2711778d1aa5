import type { ActorSend, AlarmMessage, TurnContext, TurnResult } from '../../runtime/index.js';
import { ORGANIZATION_KIND, type OrgDomainMessage } from './messages.js';

/**
 * The owner of one verified domain (kind `org-domain`, key = the domain as
 * parseDomain gives it): one record `owner` = `{org_id, claimed_at_ms}`, absent
 * while nobody holds the domain.
 *
 * A domain is the organization's that claims it first (`claim`, a step of the
 * organization's verification flow, answered through the outbox with
 * `flow_domain_claimed`); claiming one's own domain again is ok. It is free
 * again when its organization releases it (`release`: the domain removed, the
 * organization deleted, or the compensation of a claim that came too late); a
 * release by another organization changes nothing. Both are idempotent, so
 * the outbox may deliver them twice.
 */
export interface DomainOwner {
  org_id: string;
  claimed_at_ms: number;
}

export interface OrgDomainState {
  owner: DomainOwner | null;
}

export function loadOrgDomain(_key: string, records: Iterable<[string, unknown]>): OrgDomainState {
  const state: OrgDomainState = { owner: null };
  for (const [subkey, value] of records) if (subkey === 'owner') state.owner = value as DomainOwner;
  return state;
}

export function stepOrgDomain(state: OrgDomainState, message: OrgDomainMessage | AlarmMessage, context: TurnContext): TurnResult<OrgDomainState, unknown> {
  switch (message.op) {
    case 'claim': {
      const answer = (ok: boolean): ActorSend[] => [
        { kind: ORGANIZATION_KIND, key: message.org_id, message: { op: 'flow_domain_claimed', flow_id: message.flow_id, ok, domain: context.key } },
      ];
      if (state.owner && state.owner.org_id !== message.org_id) return { state, reply: { claimed: false }, sends: answer(false) };
      if (state.owner) return { state, reply: { claimed: true }, sends: answer(true) };
      state.owner = { org_id: message.org_id, claimed_at_ms: context.now };
      return { state, reply: { claimed: true }, writes: [{ subkey: 'owner', value: state.owner }], sends: answer(true) };
    }

    case 'release': {
      const sends: ActorSend[] = message.ack ? [{ kind: ORGANIZATION_KIND, key: message.ack.org_id, message: { op: 'flow_ack', flow_id: message.ack.flow_id } }] : [];
      if (state.owner?.org_id !== message.org_id) return { state, reply: { released: false }, sends };
      state.owner = null;
      return { state, reply: { released: true }, writes: [{ subkey: 'owner', value: undefined }], sends };
    }

    case 'get':
      return { state, reply: { org_id: state.owner?.org_id ?? null } };

    case '$alarm':
      return { state };
  }
}
