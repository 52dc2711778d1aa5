import { answerFlowCall } from '../flow-call.js';
import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import type { OrgDomainMessage } from './messages.js';

/**
 * The owner of one verified domain (kind `org-domain`, key = the domain as
 * parseDomain gives it): one record `owner` = `{org_id, claimed_at_ms}`, absent
 * while nobody holds the domain.
 *
 * A domain is the organization's that claims it first (`claim`, a step of the
 * organization's verification flow, sent as a flow-call (actors/flow-call.ts)
 * and answered through the outbox: another organization's domain is
 * `ok: false`, domain_taken); claiming one's own domain again is ok. It is
 * free again when its organization releases it (`release`: the domain
 * removed, the organization deleted, or the compensation of a claim that came
 * too late; a flow-call of step `ack` when the organization waits for it); a
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
    case 'flow-call':
      return answerFlowCall<OrgDomainState, OrgDomainMessage>(stepOrgDomain, state, message, context);

    case 'claim': {
      if (state.owner && state.owner.org_id !== message.org_id) {
        throw new ServiceError('domain_taken', `The domain "${context.key}" is verified by another organization.`);
      }
      if (state.owner) return { state, reply: { claimed: true, domain: context.key } };
      state.owner = { org_id: message.org_id, claimed_at_ms: context.now };
      return { state, reply: { claimed: true, domain: context.key }, writes: [{ subkey: 'owner', value: state.owner }] };
    }

    case 'release': {
      if (state.owner?.org_id !== message.org_id) return { state, reply: { released: false } };
      state.owner = null;
      return { state, reply: { released: true }, writes: [{ subkey: 'owner', value: undefined }] };
    }

    case 'get':
      return { state, reply: { org_id: state.owner?.org_id ?? null } };

    case '$alarm':
      return { state };
  }
}
