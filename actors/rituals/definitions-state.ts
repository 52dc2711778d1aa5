import { ServiceError, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { operand } from './definition-filters.js';
import {
  ritualPolicy as policy,
  type DefinitionFilter,
  type DefinitionListQuery,
  type DefinitionListView,
  type DefinitionsMessage,
  type RitualDefinition,
} from './messages.js';

/**
 * A tenant's ritual definitions: pure domain logic of the
 * `ritual-definitions` actor (storage `records`, key [tenant]).
 *
 * Records:
 *   d:<def_id>                 the current version
 *   v:<def_id>:<version, 8 digits>  an earlier version (the newest versions_kept_max are kept)
 *
 * A PUT writes a new version (version + 1); attempts keep a copy of the
 * version they armed, so dropping an old version never changes an attempt.
 */
export const CURRENT_PREFIX = 'd:';
export const VERSION_PREFIX = 'v:';

export interface DefinitionsState {
  current: Map<string, RitualDefinition>;
  /** Earlier versions per definition, oldest first. */
  versions: Map<string, RitualDefinition[]>;
}

type Result = TurnResult<DefinitionsState, unknown>;

const versionKey = (def_id: string, version: number) => `${VERSION_PREFIX}${def_id}:${String(version).padStart(8, '0')}`;

export function loadDefinitions(_key: string, records: Iterable<[string, unknown]>): DefinitionsState {
  const state: DefinitionsState = { current: new Map(), versions: new Map() };
  for (const [subkey, value] of records) {
    const definition = value as RitualDefinition;
    if (subkey.startsWith(CURRENT_PREFIX)) state.current.set(definition.ritual_def_id, definition);
    else if (subkey.startsWith(VERSION_PREFIX)) {
      const list = state.versions.get(definition.ritual_def_id) ?? [];
      list.push(definition);
      state.versions.set(definition.ritual_def_id, list);
    }
  }
  return state;
}

function notFound(): ServiceError {
  return new ServiceError('not_found', 'No such ritual definition.');
}

export function stepDefinitions(state: DefinitionsState, message: DefinitionsMessage, context: TurnContext): Result {
  switch (message.op) {
    case 'create': {
      if (state.current.size >= policy.definitions_per_tenant_max) {
        throw new ServiceError('ritual_limit_reached', `The tenant already has ${policy.definitions_per_tenant_max} ritual definitions.`);
      }
      const definition: RitualDefinition = {
        ...message.input,
        ritual_def_id: context.newId('rdef_'),
        created_by: message.caller.user_id,
        created_at_ms: context.now,
        updated_at_ms: context.now,
        version: 1,
      };
      state.current.set(definition.ritual_def_id, definition);
      return { state, reply: definition, writes: [{ subkey: CURRENT_PREFIX + definition.ritual_def_id, value: definition }] };
    }
    case 'update': {
      const current = state.current.get(message.ritual_def_id);
      if (!current) throw notFound();
      if (current.created_by !== message.caller.user_id && !message.caller.admin) {
        throw new ServiceError('forbidden', "Only the ritual's creator or a platform admin may change it.");
      }
      const next: RitualDefinition = { ...message.input, ritual_def_id: current.ritual_def_id, created_by: current.created_by, created_at_ms: current.created_at_ms, updated_at_ms: context.now, version: current.version + 1 };
      const writes: RecordWrite[] = [
        { subkey: versionKey(current.ritual_def_id, current.version), value: current },
        { subkey: CURRENT_PREFIX + current.ritual_def_id, value: next },
      ];
      const older = state.versions.get(current.ritual_def_id) ?? [];
      older.push(current);
      while (older.length > policy.versions_kept_max - 1) {
        const dropped = older.shift()!;
        writes.push({ subkey: versionKey(dropped.ritual_def_id, dropped.version), value: undefined });
      }
      state.versions.set(current.ritual_def_id, older);
      state.current.set(current.ritual_def_id, next);
      return { state, reply: next, writes };
    }
    case 'get': {
      const current = state.current.get(message.ritual_def_id);
      if (!current) throw notFound();
      if (message.version === undefined || message.version === current.version) return { state, reply: current };
      const older = (state.versions.get(message.ritual_def_id) ?? []).find((definition) => definition.version === message.version);
      if (!older) throw new ServiceError('not_found', `The ritual definition has no stored version ${message.version}.`);
      return { state, reply: older };
    }
    case 'list':
      return { state, reply: list(state, message.query) };
    default:
      return { state };
  }
}

function fieldValue(definition: RitualDefinition, field: DefinitionFilter['field']): string | number {
  switch (field) {
    case 'created_at':
      return definition.created_at_ms;
    case 'version':
      return definition.version;
    default:
      return definition[field];
  }
}

export function matchesFilter(definition: RitualDefinition, filter: DefinitionFilter): boolean {
  const actual = fieldValue(definition, filter.field);
  if (filter.operator === 'in') return filter.value.split('|').some((value) => operand(filter.field, value) === actual);
  if (filter.operator === 'contains') return String(actual).toLowerCase().includes(filter.value.toLowerCase());
  const expected = operand(filter.field, filter.value);
  switch (filter.operator) {
    case 'eq':
      return actual === expected;
    case 'ne':
      return actual !== expected;
    case 'lt':
      return actual < expected;
    case 'lte':
      return actual <= expected;
    case 'gt':
      return actual > expected;
    case 'gte':
      return actual >= expected;
  }
}

function list(state: DefinitionsState, query: DefinitionListQuery): DefinitionListView {
  const q = query.q?.toLowerCase();
  const matched = [...state.current.values()].filter(
    (definition) =>
      (!q || definition.name.toLowerCase().includes(q) || definition.description.toLowerCase().includes(q)) && query.filters.every((filter) => matchesFilter(definition, filter)),
  );
  const key = (definition: RitualDefinition): string | number =>
    query.sort_by === 'name' ? definition.name : query.sort_by === 'version' ? definition.version : definition.created_at_ms;
  const sign = query.sort_order === 'asc' ? 1 : -1;
  matched.sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    if (ka !== kb) return (ka < kb ? -1 : 1) * sign;
    return a.ritual_def_id < b.ritual_def_id ? -1 : 1;
  });
  const start = (query.page - 1) * query.page_size;
  return { total: matched.length, definitions: matched.slice(start, start + query.page_size) };
}
