import { answerFlowCall } from '../flow-call.js';
import { ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { normalizeSlug, ORG_QUERY_MAX, type OrgDirectoryMessage, type OrgListQuery, type OrgView } from './messages.js';

/**
 * The organization directory (kind `org-directory`, key `global`): slug ->
 * org_id (slugs are unique, case-insensitive) and one summary per organization
 * for the admin list. Records `s:<slug>` and `o:<org_id>` (`{rev, org}`, org
 * null = deleted tombstone, so a late summary cannot bring it back).
 *
 * Creating goes through `claim`, a step of the organization's creation flow
 * (flows.ts), sent as a flow-call (actors/flow-call.ts): the slug is taken
 * in one turn and the answer goes back to the organization through the
 * outbox (a taken slug: `ok: false`, org_slug_taken); a flow that fails after
 * its claim never happens (the claim is its last step before the
 * organization exists). Summaries come back from the organization actor
 * (`sync`, ordered by revision), as flow-calls when the organization waits
 * for them.
 */
export interface DirectorySummary {
  rev: number;
  org: OrgView | null;
}

export interface OrgDirectoryState {
  bySlug: Map<string, string>;
  summaries: Map<string, DirectorySummary>;
}

export function loadOrgDirectory(_key: string, records: Iterable<[string, unknown]>): OrgDirectoryState {
  const state: OrgDirectoryState = { bySlug: new Map(), summaries: new Map() };
  for (const [subkey, value] of records) {
    if (subkey.startsWith('s:')) state.bySlug.set(subkey.slice(2), value as string);
    else if (subkey.startsWith('o:')) state.summaries.set(subkey.slice(2), value as DirectorySummary);
  }
  return state;
}

export function listOrganizations(state: OrgDirectoryState, query: OrgListQuery): { total: number; organizations: OrgView[] } {
  const q = query.q?.trim().toLowerCase().slice(0, ORG_QUERY_MAX) || null;
  const matches: OrgView[] = [];
  for (const { org } of state.summaries.values()) {
    if (!org) continue;
    if (query.sso_enforced !== undefined && org.sso_enforced !== query.sso_enforced) continue;
    if (q && !`${org.name}\u0000${org.slug}`.toLowerCase().includes(q)) continue;
    matches.push(org);
  }
  matches.sort((a, b) => a.created_at_ms - b.created_at_ms || (a.org_id < b.org_id ? -1 : a.org_id > b.org_id ? 1 : 0));
  const start = (query.page - 1) * query.page_size;
  return { total: matches.length, organizations: matches.slice(start, start + query.page_size) };
}

export function stepOrgDirectory(
  state: OrgDirectoryState,
  message: OrgDirectoryMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<OrgDirectoryState, unknown> {
  switch (message.op) {
    case 'flow-call':
      return answerFlowCall<OrgDirectoryState, OrgDirectoryMessage>(stepOrgDirectory, state, message, context);

    case 'claim': {
      const slug = normalizeSlug(message.slug);
      const owner = state.bySlug.get(slug);
      if (owner !== undefined && owner !== message.org_id) throw new ServiceError('org_slug_taken', `The slug "${slug}" is taken by another organization.`);
      const writes: RecordWrite[] = [];
      if (owner === undefined) {
        state.bySlug.set(slug, message.org_id);
        writes.push({ subkey: `s:${slug}`, value: message.org_id });
      }
      return { state, writes, reply: { claimed: true, slug } };
    }

    case 'sync': {
      const current = state.summaries.get(message.org_id);
      if (current && current.rev >= message.rev) return { state, reply: { applied: false } };
      const summary: DirectorySummary = { rev: message.rev, org: message.org };
      state.summaries.set(message.org_id, summary);
      const writes: RecordWrite[] = [{ subkey: `o:${message.org_id}`, value: summary }];
      const slug = normalizeSlug(message.slug);
      const owner = state.bySlug.get(slug);
      if (message.org === null) {
        // A deleted organization frees its slug.
        if (owner === message.org_id) {
          state.bySlug.delete(slug);
          writes.push({ subkey: `s:${slug}`, value: undefined });
        }
      } else if (owner === undefined) {
        // Created without a claim (a trusted caller asked the actor directly): record its slug.
        state.bySlug.set(slug, message.org_id);
        writes.push({ subkey: `s:${slug}`, value: message.org_id });
      }
      return { state, writes, reply: { applied: true } };
    }

    case 'list':
      return { state, reply: listOrganizations(state, message) };

    case '$alarm':
      return { state };
  }
}
