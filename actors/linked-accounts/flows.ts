import { ServiceError, type DeferredReply, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { USER_KIND } from '../accounts/messages.js';
import { flowCall, type FlowAnswer, type FlowError } from '../flow-call.js';
import { stepIdentityLinks, type IdentityLinksState } from './state.js';
import {
  IDENTITY_INDEX_KIND,
  IDENTITY_LINKS_KIND,
  identityIndexKey,
  LINK_FLOWS_PER_USER_MAX,
  type ClaimReply,
  type IdentityLinksMessage,
  type LinkRecord,
} from './messages.js';

/**
 * Linking an external account (POST /api/v1/auth/account/link), a flow
 * coordinated by the user's identity-links actor. The edge exchanges the
 * provider's code first (outbound HTTP: the edge's I/O, no actor decision
 * precedes it), then makes one ask, `link`; every decision is here:
 *
 *   claim the identity in identity-index
 *     held by another user -> is that user live (user `get`)?
 *       gone -> take the claim over (`claim` + `replaces`)
 *       live -> does it still have the link (its identity-links `get`)?
 *         yes -> 409 account_already_linked
 *         no  -> take the claim over
 *   -> add the link here (a second account of the provider: 409); if that is
 *      refused, the claim is released (compensation) and the refusal answered.
 */

type Step = 'claim' | 'holder-user' | 'holder-link' | 'take-over';

export interface LinkFlow {
  flow_id: string;
  request_id: string | null;
  step: Step;
  provider: string;
  subject: string;
  provider_display_name: string;
  provider_email: string;
  /** The other user the index named as holder. */
  held_by: string | null;
  started_at_ms: number;
}

type Result = TurnResult<IdentityLinksState, unknown>;
type Link = Extract<IdentityLinksMessage, { op: 'link' }>;

function taken(flow: LinkFlow): FlowError {
  return { code: 'account_already_linked', message: `This ${flow.provider_display_name} account is already linked to another user.` };
}

function withFlow(state: IdentityLinksState, flow: LinkFlow | null, flow_id: string): IdentityLinksState {
  const flows = { ...(state.flows ?? {}) };
  if (flow) flows[flow_id] = flow;
  else delete flows[flow_id];
  return { ...state, flows };
}

function next(state: IdentityLinksState, context: TurnContext, flow: LinkFlow, step: Step, kind: string, key: string, call: unknown): Result {
  const moved: LinkFlow = { ...flow, step };
  return {
    state: withFlow(state, moved, moved.flow_id),
    sends: [flowCall(kind, key, call, { kind: IDENTITY_LINKS_KIND, key: context.key, flow_id: moved.flow_id, step })],
  };
}

function end(state: IdentityLinksState, flow: LinkFlow, outcome: { reply: LinkRecord } | { error: FlowError }): Result {
  const replies: DeferredReply[] = flow.request_id === null ? [] : [{ request_id: flow.request_id, ...outcome }];
  return { state: withFlow(state, null, flow.flow_id), replies };
}

export function stepLinkStart(state: IdentityLinksState, message: Link, context: TurnContext): Result {
  if (Object.keys(state.flows ?? {}).length >= LINK_FLOWS_PER_USER_MAX) {
    throw new ServiceError('rate_limited', 'Too many links in progress; retry shortly.', { retryAfterSeconds: 1 });
  }
  const flow: LinkFlow = {
    flow_id: context.newId('lkf_'),
    request_id: context.request_id,
    step: 'claim',
    provider: message.provider,
    subject: message.subject,
    provider_display_name: message.provider_display_name,
    provider_email: message.provider_email,
    held_by: null,
    started_at_ms: context.now,
  };
  const claim = next(state, context, flow, 'claim', IDENTITY_INDEX_KIND, identityIndexKey(flow.provider, flow.subject), { op: 'claim', user_id: context.key });
  return { ...claim, defer: true };
}

/** The identity is claimed for this user: add the link here; if refused, release the claim and answer the refusal. */
function addLink(state: IdentityLinksState, flow: LinkFlow, context: TurnContext): Result {
  let added: Result;
  try {
    added = stepIdentityLinks(state, {
      op: 'add',
      provider: flow.provider,
      subject: flow.subject,
      provider_display_name: flow.provider_display_name,
      provider_email: flow.provider_email,
    }, context);
  } catch (error) {
    if (!(error instanceof ServiceError)) throw error;
    const ended = end(state, flow, { error: { code: error.code, message: error.message } });
    // Compensation: the claim this flow made is released.
    return { ...ended, sends: [{ kind: IDENTITY_INDEX_KIND, key: identityIndexKey(flow.provider, flow.subject), message: { op: 'release', user_id: context.key } }] };
  }
  return { ...end(added.state, flow, { reply: added.reply as LinkRecord }), sends: added.sends };
}

function takeOver(state: IdentityLinksState, flow: LinkFlow, context: TurnContext): Result {
  return next(state, context, flow, 'take-over', IDENTITY_INDEX_KIND, identityIndexKey(flow.provider, flow.subject), { op: 'claim', user_id: context.key, replaces: flow.held_by! });
}

export function stepLinkAnswer(state: IdentityLinksState, answer: FlowAnswer, context: TurnContext): Result {
  const flow = state.flows?.[answer.flow_id];
  if (!flow || flow.step !== answer.step) return { state };
  if (!answer.ok && !(flow.step === 'holder-user' && answer.error.code === 'not_found')) return end(state, flow, { error: answer.error });
  switch (flow.step) {
    case 'claim': {
      const claim = answer.ok ? (answer.reply as ClaimReply) : null;
      if (claim?.claimed) return addLink(state, flow, context);
      // Held by another user: a stale claim (a link that failed half-way, a deleted user, an unlink in flight) is taken over.
      return next(state, context, { ...flow, held_by: claim!.held_by }, 'holder-user', USER_KIND, claim!.held_by, { op: 'get' });
    }
    case 'holder-user':
      if (!answer.ok) return takeOver(state, flow, context); // the holder was deleted
      return next(state, context, flow, 'holder-link', IDENTITY_LINKS_KIND, flow.held_by!, { op: 'get', provider: flow.provider });
    case 'holder-link': {
      const link = answer.ok ? (answer.reply as LinkRecord | null) : null;
      if (link !== null && link.subject === flow.subject) return end(state, flow, { error: taken(flow) });
      return takeOver(state, flow, context);
    }
    case 'take-over': {
      const claim = answer.ok ? (answer.reply as ClaimReply) : null;
      if (!claim?.claimed) return end(state, flow, { error: taken(flow) });
      return addLink(state, flow, context);
    }
  }
}
