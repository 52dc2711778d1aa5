import { ServiceError } from '../../runtime/index.js';
import {
  QUEUE_STRATEGIES,
  ROOM_STATUSES,
  waitingRoomLimits,
  type AdmissionRate,
  type AntiGaming,
  type PriorityGroup,
  type QueueStrategy,
  type RoomConfig,
  type RoomInput,
  type RoomStatus,
} from './messages.js';
import { validateMatchRules, type MatchRules, type RuleIssue } from './rules.js';

/** Room configuration: types, defaults, limits and validation (pure). */
/** The group every member without a matching (or named) group belongs to. */
export const DEFAULT_GROUP = 'default';
/** A room id that would shadow GET /api/v1/waiting-rooms/global-bans/{member_id}. */
export const RESERVED_ROOM_IDS = new Set(['global-bans']);

export const defaults = {
  auto_admit: true,
  queue_strategy: 'fifo' as QueueStrategy,
  session_ttl_seconds: 300,
  anti_gaming: { join_rate_limit_max_attempts: 10, join_rate_limit_window_seconds: 60, rejoin_cooldown_seconds: 30 } satisfies AntiGaming,
  status: 'active' as RoomStatus,
};

const ROOM_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;
const GROUP_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;

function intIn(value: unknown, min: number, max: number, field: string, issues: RuleIssue[]): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    issues.push({ field, message: `must be an integer from ${min} to ${max}` });
  }
}

export function badRequest(issues: RuleIssue[]): ServiceError {
  return new ServiceError('BAD_REQUEST', `${issues[0].field} ${issues[0].message}`, { details: issues });
}

export function validateRoomId(room_id: string): RuleIssue[] {
  if (room_id.length === 0 || room_id.length > waitingRoomLimits.room_id_length_max || !ROOM_ID_PATTERN.test(room_id)) {
    return [{ field: 'body.room_id', message: `must be 1-${waitingRoomLimits.room_id_length_max} characters of A-Z a-z 0-9 . _ : - starting with a letter or digit` }];
  }
  if (RESERVED_ROOM_IDS.has(room_id)) return [{ field: 'body.room_id', message: 'is reserved' }];
  return [];
}

/** Serialised size of a JSON value, in UTF-16 code units (a bound, not an exact byte count). */
export function jsonSize(value: unknown): number {
  return JSON.stringify(value)?.length ?? 0;
}

/**
 * Builds the configuration a create (base null) or replace (base the current
 * one) produces, or throws BAD_REQUEST naming every failing field.
 */
export function buildConfig(base: RoomConfig | null, room_id: string, input: RoomInput, now: number, by: string): RoomConfig {
  const issues: RuleIssue[] = [];
  if (!base) {
    issues.push(...validateRoomId(room_id));
    if (input.capacity === undefined) issues.push({ field: 'body.capacity', message: 'is required' });
    if (input.admission_rate === undefined) issues.push({ field: 'body.admission_rate', message: 'is required' });
  }
  const admission_rate: AdmissionRate = { ...(base?.admission_rate ?? { batch_size: NaN, interval_seconds: NaN }), ...input.admission_rate };
  const anti_gaming: AntiGaming = { ...(base?.anti_gaming ?? defaults.anti_gaming), ...input.anti_gaming };
  const capacity = input.capacity ?? base?.capacity ?? NaN;
  const session_ttl_seconds = input.session_ttl_seconds ?? base?.session_ttl_seconds ?? defaults.session_ttl_seconds;
  const auto_admit = input.auto_admit ?? base?.auto_admit ?? defaults.auto_admit;
  const queue_strategy = input.queue_strategy ?? base?.queue_strategy ?? defaults.queue_strategy;
  const status = input.status ?? base?.status ?? defaults.status;
  const metadata = input.metadata ?? base?.metadata ?? {};

  if (input.capacity !== undefined) intIn(capacity, 1, waitingRoomLimits.capacity_max, 'body.capacity', issues);
  if (input.admission_rate !== undefined) {
    intIn(admission_rate.batch_size, 1, waitingRoomLimits.batch_size_max, 'body.admission_rate.batch_size', issues);
    intIn(admission_rate.interval_seconds, 1, waitingRoomLimits.interval_seconds_max, 'body.admission_rate.interval_seconds', issues);
  }
  intIn(anti_gaming.join_rate_limit_max_attempts, 0, waitingRoomLimits.join_rate_limit_max_attempts_max, 'body.anti_gaming.join_rate_limit_max_attempts', issues);
  intIn(anti_gaming.join_rate_limit_window_seconds, 1, waitingRoomLimits.join_rate_limit_window_seconds_max, 'body.anti_gaming.join_rate_limit_window_seconds', issues);
  intIn(anti_gaming.rejoin_cooldown_seconds, 0, waitingRoomLimits.rejoin_cooldown_seconds_max, 'body.anti_gaming.rejoin_cooldown_seconds', issues);
  intIn(session_ttl_seconds, 1, waitingRoomLimits.session_ttl_seconds_max, 'body.session_ttl_seconds', issues);
  if (typeof auto_admit !== 'boolean') issues.push({ field: 'body.auto_admit', message: 'must be a boolean' });
  if (!(QUEUE_STRATEGIES as readonly string[]).includes(queue_strategy)) {
    issues.push({ field: 'body.queue_strategy', message: `must be one of ${QUEUE_STRATEGIES.join(', ')}` });
  }
  if (!(ROOM_STATUSES as readonly string[]).includes(status)) issues.push({ field: 'body.status', message: `must be one of ${ROOM_STATUSES.join(', ')}` });
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) issues.push({ field: 'body.metadata', message: 'must be an object' });
  else if (jsonSize(metadata) > waitingRoomLimits.room_metadata_bytes_max) {
    issues.push({ field: 'body.metadata', message: `must serialise to at most ${waitingRoomLimits.room_metadata_bytes_max} bytes` });
  }

  let priority_groups: PriorityGroup[] = base?.priority_groups ?? [];
  if (input.priority_groups !== undefined) {
    priority_groups = [];
    const groups = input.priority_groups;
    if (!Array.isArray(groups)) issues.push({ field: 'body.priority_groups', message: 'must be an array' });
    else {
      if (groups.length > waitingRoomLimits.priority_groups_max) {
        issues.push({ field: 'body.priority_groups', message: `must have at most ${waitingRoomLimits.priority_groups_max} groups` });
      }
      const seen = new Set<string>();
      groups.forEach((group, i) => {
        const field = `body.priority_groups.${i}`;
        const name = group?.name;
        if (typeof name !== 'string' || name.length === 0 || name.length > waitingRoomLimits.group_name_length_max || !GROUP_NAME_PATTERN.test(name)) {
          issues.push({ field: `${field}.name`, message: `must be 1-${waitingRoomLimits.group_name_length_max} characters of A-Z a-z 0-9 . _ : -` });
        } else if (seen.has(name)) issues.push({ field: `${field}.name`, message: 'duplicates another group name' });
        else seen.add(name);
        const boost = group?.boost ?? 0;
        intIn(boost, 0, waitingRoomLimits.boost_max, `${field}.boost`, issues);
        const match_rules = (group?.match_rules ?? null) as MatchRules;
        issues.push(...validateMatchRules(match_rules, `${field}.match_rules`));
        if (name === DEFAULT_GROUP && match_rules !== null) {
          issues.push({ field: `${field}.match_rules`, message: 'must be null for the default group (it takes every member no other group matches)' });
        }
        priority_groups.push({ name, boost, match_rules });
      });
    }
  }
  if (issues.length > 0) throw badRequest(issues);
  return {
    room_id: base?.room_id ?? room_id,
    capacity,
    admission_rate,
    anti_gaming,
    auto_admit,
    priority_groups,
    queue_strategy: queue_strategy as QueueStrategy,
    session_ttl_seconds,
    metadata,
    status: status as RoomStatus,
    created_at: base?.created_at ?? now,
    created_by: base?.created_by ?? by,
    updated_at: now,
  };
}

/** The boost of a group name under `config` (default: 0 unless a group named default is configured). */
export function boostOf(config: RoomConfig, group: string): number {
  for (const candidate of config.priority_groups) if (candidate.name === group) return candidate.boost;
  return 0;
}

export function groupExists(config: RoomConfig, group: string): boolean {
  return group === DEFAULT_GROUP || config.priority_groups.some((candidate) => candidate.name === group);
}
