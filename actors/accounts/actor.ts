import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadDirectory, stepDirectory, type DirectoryState } from './directory-state.js';
import { initialLoginFlowState, stepLoginFlow, type LoginFlowStateOrNone } from './flows.js';
import { initialThrottleState, stepThrottle, type ThrottleState } from './login-throttle-state.js';
import { DIRECTORY_KIND, LOGIN_FLOW_KIND, LOGIN_THROTTLE_KIND, USER_KIND, type DirectoryMessage, type LoginFlowMessage, type ThrottleMessage, type UserMessage } from './messages.js';
import { initialUserState, stepUser, type UserState } from './user-state.js';

/** One user: profile, password hash, sessions, two-factor (a snapshot per user id). */
export const userActor: SnapshotActorDefinition<UserState, UserMessage, unknown> = {
  kind: USER_KIND,
  storage: 'snapshot',
  initial: initialUserState,
  step: stepUser,
};

/** Names to user ids and the admin list's summaries: one record per name and per user. */
export const directoryActor: RecordsActorDefinition<DirectoryState, DirectoryMessage, unknown> = {
  kind: DIRECTORY_KIND,
  storage: 'records',
  load: loadDirectory,
  step: stepDirectory,
};

/** One counted subject of the login, second-step and registration throttles. */
export const loginThrottleActor: SnapshotActorDefinition<ThrottleState, ThrottleMessage, unknown> = {
  kind: LOGIN_THROTTLE_KIND,
  storage: 'snapshot',
  initial: initialThrottleState,
  step: stepThrottle,
};

/** One login, registration or code check in flight (key = a fresh id per attempt): the throttle saga (flows.ts). */
export const loginFlowActor: SnapshotActorDefinition<LoginFlowStateOrNone, LoginFlowMessage, unknown> = {
  kind: LOGIN_FLOW_KIND,
  storage: 'snapshot',
  initial: initialLoginFlowState,
  step: stepLoginFlow,
};
