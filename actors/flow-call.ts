import { isServiceError, type DeferredReply, type ErrorCode, type TurnContext, type TurnResult } from '../runtime/index.js';

/**
 * How a flow (a coordinator actor, docs/architecture.md "Flows") asks another
 * actor to do one step and hears the outcome, through the outbox both ways.
 *
 * The coordinator sends `{op: 'flow-call', call, reply_to}` where `call` is an
 * ordinary message of the receiver. The receiver runs its own step on `call`
 * (one `case 'flow-call'` calling answerFlowCall) and, in the same commit,
 * sends a `flow-answer` back to `reply_to`: the step's reply, or the
 * ServiceError it was refused with. Both messages are outbox entries, so each
 * is applied once even across a crash (the receiver de-duplicates), and a
 * refusal comes back as an answer instead of being dropped by the outbox.
 */
export interface FlowReplyTo {
  kind: string;
  key: string;
  /** The coordinator's id for this run of the flow. */
  flow_id: string;
  /** The step this answers, so a late answer of an earlier step is told apart. */
  step: string;
}

export interface FlowCall<Message = unknown> {
  op: 'flow-call';
  call: Message;
  reply_to: FlowReplyTo;
}

export interface FlowError {
  code: ErrorCode;
  message: string;
  details?: unknown;
}

export type FlowAnswer =
  | { op: 'flow-answer'; flow_id: string; step: string; ok: true; reply: unknown }
  | { op: 'flow-answer'; flow_id: string; step: string; ok: false; error: FlowError };

/** An answer read with the reply type of the call it answers (the coordinator knows it by `step`). */
export type FlowOutcome<Reply> = { ok: true; reply: Reply } | { ok: false; error: FlowError };

export function flowOutcome<Reply>(answer: FlowAnswer): FlowOutcome<Reply> {
  return answer.ok ? { ok: true, reply: answer.reply as Reply } : { ok: false, error: answer.error };
}

/**
 * Passes an answer on to the ask the coordinator deferred for it: the reply
 * (through `shape`), or the refusal with its code, message and details.
 */
export function relayAnswer<Reply>(request_id: string, answer: FlowAnswer, shape: (reply: Reply) => unknown = (reply) => reply): DeferredReply {
  return answer.ok ? { request_id, reply: shape(answer.reply as Reply) } : { request_id, error: answer.error };
}

/** The send that asks `kind`/`key` to run `call` and answer to `reply_to`. */
export function flowCall<Message>(kind: string, key: string, call: Message, reply_to: FlowReplyTo): { kind: string; key: string; message: FlowCall<Message> } {
  return { kind, key, message: { op: 'flow-call', call, reply_to } };
}

/**
 * A refusal that keeps the turn's effects: a step that must change state
 * before it can refuse (e.g. housekeeping it owes either way) returns this as
 * its reply instead of throwing; answerFlowCall answers `ok: false` with the
 * error and keeps the turn's writes and sends. A class, so no ordinary reply
 * can be taken for one.
 */
export class FlowRefusal {
  constructor(readonly error: FlowError) {}
}

/**
 * The receiver's side: runs `step` on the call and answers the coordinator.
 * A ServiceError (the contract: thrown before anything changed) becomes an
 * answer with `ok: false`, and so does a FlowRefusal reply (with the turn's
 * effects kept); any other exception is a defect and propagates.
 */
export function answerFlowCall<State, Message>(
  step: (state: State, message: Message, context: TurnContext) => TurnResult<State, unknown>,
  state: State,
  message: FlowCall<Message>,
  context: TurnContext,
): TurnResult<State, unknown> {
  const { reply_to } = message;
  const answer = (outcome: { ok: true; reply: unknown } | { ok: false; error: FlowError }) => ({
    kind: reply_to.kind,
    key: reply_to.key,
    message: { op: 'flow-answer', flow_id: reply_to.flow_id, step: reply_to.step, ...outcome } as FlowAnswer,
  });
  try {
    const result = step(state, message.call, context);
    if (result.reply instanceof FlowRefusal) {
      const { error } = result.reply;
      return { ...result, reply: { refused: error.code }, sends: [...(result.sends ?? []), answer({ ok: false, error })] };
    }
    return { ...result, sends: [...(result.sends ?? []), answer({ ok: true, reply: result.reply ?? null })] };
  } catch (error) {
    if (!isServiceError(error)) throw error;
    const refused: FlowError = { code: error.code, message: error.message };
    if (error.details !== undefined) refused.details = error.details;
    return { state, reply: { refused: error.code }, sends: [answer({ ok: false, error: refused })] };
  }
}
