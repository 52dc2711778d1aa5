import { ServiceError } from '../../runtime/index.js';
import { ritualPolicy as policy, type EscalationStep, type NotifyTargets, type RitualDefinitionInput, type RitualMode } from './messages.js';

/**
 * A definition as a client writes it (create or PUT), checked across fields
 * and completed with its defaults. The edge's schema has already checked each
 * field's type and range; what is left is what relates fields to each other.
 */
export interface DefinitionBody {
  name: string;
  description?: string;
  parts: { part_id: string; assigned_to: string; actor_type?: 'user' }[];
  ordering?: string[];
  mode?: RitualMode;
  window_ms: number;
  quorum?: { required: number; of: number };
  checkin_interval_seconds?: number;
  arm_ttl_seconds?: number;
  escalation?: { action?: 'notify'; after_missed_seconds: number; webhook_ids?: string[]; pubsub_channel?: string }[];
  on_complete?: { webhook_ids?: string[]; pubsub_channel?: string } | null;
  on_dispute?: 'none';
  announce_channel?: string | null;
}

function invalid(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}`, { details: [{ field, message }] });
}

function targets(field: string, body: { webhook_ids?: string[]; pubsub_channel?: string }): NotifyTargets {
  const webhook_ids = body.webhook_ids ?? [];
  if (new Set(webhook_ids).size !== webhook_ids.length) throw invalid(`${field}.webhook_ids`, 'names a webhook twice');
  const pubsub_channel = body.pubsub_channel ?? null;
  if (webhook_ids.length === 0 && pubsub_channel === null) throw invalid(field, 'needs webhook_ids or a pubsub_channel');
  return { webhook_ids, pubsub_channel };
}

export function checkDefinition(body: DefinitionBody): RitualDefinitionInput {
  const ids = body.parts.map((part) => part.part_id);
  ids.forEach((id, i) => {
    if (ids.indexOf(id) !== i) throw invalid(`body.parts.${i}.part_id`, `names part ${id} twice`);
  });
  const ordering = body.ordering ?? ids;
  if (ordering.length !== ids.length || new Set(ordering).size !== ordering.length || ordering.some((id) => !ids.includes(id))) {
    throw invalid('body.ordering', 'must list every part_id exactly once');
  }
  const quorum = body.quorum ?? { required: ids.length, of: ids.length };
  if (quorum.of !== ids.length) throw invalid('body.quorum.of', `must equal the number of parts (${ids.length})`);
  if (quorum.required < 1 || quorum.required > quorum.of) throw invalid('body.quorum.required', 'must be between 1 and quorum.of');
  const checkin_interval_seconds = body.checkin_interval_seconds ?? 0;
  const escalation: EscalationStep[] = (body.escalation ?? [])
    .map((step, i) => ({ action: 'notify' as const, after_missed_seconds: step.after_missed_seconds, ...targets(`body.escalation.${i}`, step) }))
    .sort((a, b) => a.after_missed_seconds - b.after_missed_seconds);
  if (escalation.length > 0 && checkin_interval_seconds === 0) {
    throw invalid('body.checkin_interval_seconds', 'must be set (> 0) for escalation: a step fires when a check-in is missed');
  }
  return {
    name: body.name,
    description: body.description ?? '',
    parts: body.parts.map((part) => ({ part_id: part.part_id, assigned_to: part.assigned_to, actor_type: 'user' })),
    ordering,
    mode: body.mode ?? 'forward',
    window_ms: body.window_ms,
    quorum: { required: quorum.required, of: quorum.of },
    checkin_interval_seconds,
    arm_ttl_seconds: body.arm_ttl_seconds ?? policy.arm_ttl_seconds_default,
    escalation,
    on_complete: body.on_complete ? targets('body.on_complete', body.on_complete) : null,
    on_dispute: 'none',
    announce_channel: body.announce_channel ?? null,
  };
}
