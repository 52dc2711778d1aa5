import { answerFlowCall, type FlowCall } from '../../actors/flow-call.js';
import { DIRECTORY_KIND, USER_KIND } from '../../actors/accounts/messages.js';
import { ServiceError, type RecordsActorDefinition, type TurnContext, type TurnResult } from '../../runtime/index.js';

/**
 * Stand-ins for the two accounts actors the organizations flows ask (the user
 * actor's `get`, the directory's `lookup`), as `records` actors for
 * test/helpers/actor-world.ts. They answer flow-calls like the real ones
 * (actors/flow-call.ts). Seed them with `put`.
 */
type StubUser = { email: string; email_verified: boolean };
type UserStubMessage = { op: 'put'; email: string; email_verified: boolean } | { op: 'get' } | FlowCall<{ op: 'get' }>;
type DirectoryStubMessage = { op: 'put'; login: string; user_id: string } | { op: 'lookup'; login: string } | FlowCall<{ op: 'lookup'; login: string }>;

function stepUserStub(state: { user: StubUser | null }, message: UserStubMessage, context: TurnContext): TurnResult<{ user: StubUser | null }, unknown> {
  switch (message.op) {
    case 'flow-call':
      return answerFlowCall(stepUserStub, state, message as FlowCall<UserStubMessage>, context);
    case 'put': {
      const user = { email: message.email, email_verified: message.email_verified };
      return { state: { user }, writes: [{ subkey: 'user', value: user }] };
    }
    case 'get':
      if (!state.user) throw new ServiceError('not_found', 'No such user.');
      return { state, reply: { id: context.key, ...state.user } };
  }
}

function stepDirectoryStub(state: Map<string, string>, message: DirectoryStubMessage, context: TurnContext): TurnResult<Map<string, string>, unknown> {
  switch (message.op) {
    case 'flow-call':
      return answerFlowCall(stepDirectoryStub, state, message as FlowCall<DirectoryStubMessage>, context);
    case 'put':
      state.set(message.login.toLowerCase(), message.user_id);
      return { state, writes: [{ subkey: message.login.toLowerCase(), value: message.user_id }] };
    case 'lookup':
      return { state, reply: { user_id: state.get(message.login.trim().toLowerCase()) ?? null } };
  }
}

export const userStubActor: RecordsActorDefinition<{ user: StubUser | null }, UserStubMessage, unknown> = {
  kind: USER_KIND,
  storage: 'records',
  load: (_key, records) => {
    let user: StubUser | null = null;
    for (const [subkey, value] of records) if (subkey === 'user') user = value as StubUser;
    return { user };
  },
  step: stepUserStub,
};

export const directoryStubActor: RecordsActorDefinition<Map<string, string>, DirectoryStubMessage, unknown> = {
  kind: DIRECTORY_KIND,
  storage: 'records',
  load: (_key, records) => new Map([...records].map(([login, user_id]) => [login, user_id as string])),
  step: stepDirectoryStub,
};

export const accountsStubActors = [userStubActor, directoryStubActor];
