import type { ActorSend, DeferredReply, TurnContext } from '../../runtime/index.js';
import { flowCall, type FlowAnswer } from '../flow-call.js';

/**
 * A coordinator's fan-out that adds up a count (cancel-bulk: `cancelled`,
 * cleanup: `deleted`): one flow-call per queue through the outbox, the ask
 * deferred until every queue answered, then one reply with the sum. The
 * directory (a tenant's queues) and the registry (every queue) use it.
 *
 * The waiting set lives in memory with the activation, like the webhook
 * actor's acknowledgements: if the node stops first, the caller gets 503
 * flow_interrupted while every queue still applies its part (the outbox);
 * a repeated cancel-bulk or cleanup then finds nothing more to do.
 */
export interface SumFanout {
  request_id: string | null;
  waiting: Set<string>;
  total: number;
  /** The reply field each queue answers with. */
  field: string;
  /** The coordinator's reply: `{[reply_field]: total}`. */
  reply_field: string;
}

export interface FanoutTarget {
  kind: string;
  key: string;
  call: unknown;
}

export function startSum(
  flows: Map<string, SumFanout>,
  self: { kind: string; key: string },
  targets: FanoutTarget[],
  field: string,
  reply_field: string,
  context: TurnContext,
): { sends: ActorSend[]; defer: boolean; reply?: unknown } {
  if (targets.length === 0) return { sends: [], defer: false, reply: { [reply_field]: 0 } };
  const flow_id = context.newId('jqf_');
  const fanout: SumFanout = { request_id: context.request_id, waiting: new Set(), total: 0, field, reply_field };
  const sends = targets.map((target, index) => {
    const step = `q${index}`;
    fanout.waiting.add(step);
    return flowCall(target.kind, target.key, target.call, { kind: self.kind, key: self.key, flow_id, step });
  });
  flows.set(flow_id, fanout);
  return { sends, defer: context.request_id !== null, reply: context.request_id === null ? { [reply_field]: 0 } : undefined };
}

/** Counts one answer; the reply once the last one is in. An answer of another flow or step is ignored. */
export function answerSum(flows: Map<string, SumFanout>, answer: FlowAnswer): DeferredReply[] {
  const fanout = flows.get(answer.flow_id);
  if (!fanout || !fanout.waiting.delete(answer.step)) return [];
  if (answer.ok) {
    const value = (answer.reply as Record<string, unknown> | null)?.[fanout.field];
    if (typeof value === 'number') fanout.total += value;
  }
  if (fanout.waiting.size > 0) return [];
  flows.delete(answer.flow_id);
  return fanout.request_id === null ? [] : [{ request_id: fanout.request_id, reply: { [fanout.reply_field]: fanout.total } }];
}
