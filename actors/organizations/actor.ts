import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadOrgDirectory, stepOrgDirectory, type OrgDirectoryMessage, type OrgDirectoryState } from './directory-state.js';
import { loadInvitationIndex, stepInvitationIndex, type InvitationIndexMessage, type InvitationIndexState } from './invitation-index-state.js';
import {
  INVITATION_INDEX_KIND,
  loadOrganization,
  ORG_DIRECTORY_KEY,
  ORG_DIRECTORY_KIND,
  ORGANIZATION_KIND,
  stepOrganization,
  USER_ORGS_KIND,
  type OrganizationMessage,
  type OrganizationState,
} from './state.js';
import { loadUserOrgs, stepUserOrgs, type UserOrgsMessage, type UserOrgsState } from './user-orgs-state.js';

export { INVITATION_INDEX_KIND, ORG_DIRECTORY_KEY, ORG_DIRECTORY_KIND, ORGANIZATION_KIND, USER_ORGS_KIND };

/** Organizations are global (not per tenant): the key is the org_id. */
export const organizationActor: RecordsActorDefinition<OrganizationState, OrganizationMessage, unknown> = {
  kind: ORGANIZATION_KIND,
  storage: 'records',
  load: loadOrganization,
  step: stepOrganization,
};

/** Key = user_id. */
export const userOrgsActor: RecordsActorDefinition<UserOrgsState, UserOrgsMessage, unknown> = {
  kind: USER_ORGS_KIND,
  storage: 'records',
  load: loadUserOrgs,
  step: stepUserOrgs,
};

/** Key = normalized e-mail (see normalizeEmail in state.ts). */
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

export const organizationActors = [organizationActor, userOrgsActor, invitationIndexActor, orgDirectoryActor];
