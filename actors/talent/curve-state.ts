import { ServiceError, type AlarmMessage, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { answerFlowCall } from '../flow-call.js';
import { normaliseCurve } from './curves.js';
import type { Curve, CurveMessage } from './messages.js';

/**
 * One XP curve of a tenant (key = talentCurveKey). Immutable once created:
 * the spec has no PUT, so the copies user actors keep never go stale.
 */
export type CurveState = Curve | null;

export function stepCurve(state: CurveState, message: CurveMessage | AlarmMessage, context: TurnContext): TurnResult<CurveState, unknown> {
  switch (message.op) {
    case 'create': {
      if (state) throw new ServiceError('talent_curve_exists', `A curve with curve_id ${state.curve_id} already exists.`);
      const curve = normaliseCurve(message.curve, message.by, context.now);
      return { state: curve, reply: curve };
    }
    case 'get':
      if (!state) throw new ServiceError('talent_curve_not_found', 'No curve with this curve_id.');
      return { state, reply: state };
    case 'flow-call':
      return answerFlowCall((current: CurveState, call: { op: 'get' }, turn) => stepCurve(current, call, turn), state, message, context);
    case '$alarm':
      return { state };
  }
}
