import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall, type FlowCall } from '../flow-call.js';
import { formPolicy, type StateMachineDefinition, type StateMachineMessage, type StateMachineView } from './messages.js';

/**
 * A named state machine of a tenant: pure domain logic of the
 * `form-state-machine` actor (snapshot, key = stateMachineKey(tenant, name)).
 * The minimal resource `fsm` hooks address: a set of states, an initial one,
 * the allowed moves, the current state and the newest moves. A hook's move
 * arrives as a flow-call through the outbox (applied once); moving to the
 * current state is allowed and changes nothing, so a hook retried after an
 * unknown outcome is harmless.
 */
export type StateMachineState = StateMachineView | null;

export function definitionProblems(definition: StateMachineDefinition): string[] {
  const problems: string[] = [];
  const states = new Set(definition.states);
  if (states.size !== definition.states.length) problems.push('states names a state twice');
  if (!states.has(definition.initial)) problems.push(`initial ${definition.initial} is not one of the states`);
  for (const [index, move] of definition.transitions.entries()) {
    if (!states.has(move.from) || !states.has(move.to)) problems.push(`transitions[${index}] names a state that is not one of the states`);
  }
  return problems;
}

export function stepStateMachine(state: StateMachineState, message: StateMachineMessage | FlowCall<StateMachineMessage> | AlarmMessage, context: TurnContext): TurnResult<StateMachineState, unknown> {
  switch (message.op) {
    case 'put': {
      const problems = definitionProblems(message.definition);
      if (problems.length > 0) throw new ServiceError('BAD_REQUEST', problems[0], { details: problems.map((problem) => ({ field: 'body', message: problem })) });
      if (state && !message.caller.admin && state.created_by !== message.caller.user_id) {
        throw new ServiceError('forbidden', "Only the state machine's creator or a platform admin may change it.");
      }
      if (state && !message.definition.states.includes(state.state)) {
        throw new ServiceError('conflict', `The machine is in ${state.state}, which the new definition leaves out.`, { details: { state: state.state } });
      }
      const next: StateMachineView = state
        ? { ...state, ...message.definition, updated_at_ms: context.now }
        : { name: message.name, ...message.definition, state: message.definition.initial, moves: 0, created_by: message.caller.user_id, created_at_ms: context.now, updated_at_ms: context.now, history: [] };
      return { state: next, reply: next };
    }
    case 'get':
      if (!state) throw new ServiceError('not_found', 'No such state machine.');
      return { state, reply: state };
    case 'move': {
      if (!state) throw new ServiceError('not_found', 'No such state machine.');
      if (message.caller && !message.caller.admin && state.created_by !== message.caller.user_id) {
        throw new ServiceError('forbidden', "Only the state machine's creator or a platform admin moves it by hand.");
      }
      if (state.state === message.target_state) return { state, reply: state };
      if (!state.transitions.some((move) => move.from === state.state && move.to === message.target_state)) {
        throw new ServiceError('invalid_status_transition', `The machine cannot move from ${state.state} to ${message.target_state}.`, { details: { from: state.state, to: message.target_state } });
      }
      const history = [...state.history, { from: state.state, to: message.target_state, at_ms: context.now, cause: message.cause }].slice(-formPolicy.state_machine_history_max);
      const next: StateMachineView = { ...state, state: message.target_state, moves: state.moves + 1, updated_at_ms: context.now, history };
      return { state: next, reply: next };
    }
    case 'flow-call':
      return answerFlowCall(stepStateMachine, state, message, context);
    default:
      return { state };
  }
}
