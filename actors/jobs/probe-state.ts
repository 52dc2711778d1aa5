import type { AlarmMessage, TurnContext, TurnResult } from '../../runtime/index.js';
import { JOB_PROBE_EVENT, jobPolicy, type ProbeMessage } from './messages.js';

/**
 * The scheduler probe: pure logic of the `job-scheduler-probe` actor
 * (storage `snapshot`, key = the node's id). It keeps one durable alarm
 * every probe_interval_ms and emits `job.scheduler_tick` each time it
 * fires, so the node's job worker can report in GET /health/job_queue that
 * durable alarms (what fires due jobs) really fire here. `start` (sent by
 * the worker at boot) arms it and ticks at once.
 */
export const PROBE_ALARM = 'probe';

export interface ProbeState {
  ticks: number;
}

export function stepProbe(state: ProbeState, message: ProbeMessage | AlarmMessage, context: TurnContext): TurnResult<ProbeState, unknown> {
  if (message.op === '$alarm' && message.name !== PROBE_ALARM) return { state };
  const next: ProbeState = { ticks: state.ticks + 1 };
  return {
    state: next,
    reply: { ticks: next.ticks },
    alarms: [{ name: PROBE_ALARM, due_ms: context.now + jobPolicy.probe_interval_ms }],
    events: [{ type: JOB_PROBE_EVENT, data: { node: context.key, at_ms: context.now } }],
  };
}
