import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadOrgDirectory, stepOrgDirectory, type OrgDirectoryState } from './directory-state.js';
import { loadOrgDomain, stepOrgDomain, type OrgDomainState } from './domain-index-state.js';
import { stepOrganizationFlows } from './flows.js';
import { loadInvitationIndex, stepInvitationIndex, type InvitationIndexState } from './invitation-index-state.js';
import {
  INVITATION_INDEX_KIND,
  ORG_DIRECTORY_KIND,
  ORG_DOMAIN_KIND,
  ORGANIZATION_KIND,
  USER_ORGS_KIND,
  type InvitationIndexMessage,
  type OrgDirectoryMessage,
  type OrgDomainMessage,
  type OrganizationMessage,
  type UserOrgsMessage,
} from './messages.js';
import { loadOrganization, type OrganizationState } from './state.js';
import { loadUserOrgs, stepUserOrgs, type UserOrgsState } from './user-orgs-state.js';

/** Organizations are global (not per tenant): the key is the org_id. Its step coordinates the area's flows (flows.ts). */
export const organizationActor: RecordsActorDefinition<OrganizationState, OrganizationMessage, unknown> = {
  kind: ORGANIZATION_KIND,
  storage: 'records',
  load: loadOrganization,
  step: stepOrganizationFlows,
};

/** Key = user_id. */
export const userOrgsActor: RecordsActorDefinition<UserOrgsState, UserOrgsMessage, unknown> = {
  kind: USER_ORGS_KIND,
  storage: 'records',
  load: loadUserOrgs,
  step: stepUserOrgs,
};

/** Key = normalized e-mail (see normalizeEmail in messages.ts). */
export const invitationIndexActor: RecordsActorDefinition<InvitationIndexState, InvitationIndexMessage, unknown> = {
  kind: INVITATION_INDEX_KIND,
  storage: 'records',
  load: loadInvitationIndex,
  step: stepInvitationIndex,
};

/** Key = ORG_DIRECTORY_KEY. */
export const orgDirectoryActor: RecordsActorDefinition<OrgDirectoryState, OrgDirectoryMessage, unknown> = {
  kind: ORG_DIRECTORY_KIND,
  storage: 'records',
  load: loadOrgDirectory,
  step: stepOrgDirectory,
};

/** Key = a domain, as parseDomain gives it (messages.ts). */
export const orgDomainActor: RecordsActorDefinition<OrgDomainState, OrgDomainMessage, unknown> = {
  kind: ORG_DOMAIN_KIND,
  storage: 'records',
  load: loadOrgDomain,
  step: stepOrgDomain,
};

export const organizationActors = [organizationActor, userOrgsActor, invitationIndexActor, orgDirectoryActor, orgDomainActor];
