import { COMPONENTS_BYTES_MAX, ENTITIES_PER_INDEX_MAX, type Components, type EntityChange, type EntityMutation, type MutationResult } from './messages.js';
import { serialisedBytes } from '../../runtime/index.js';

/**
 * The mutation and version rules, pure: one mutation against the entity it
 * names. Each mutation is judged on its own (a stale version fails that
 * entity only); mutations of one batch apply in order, so a second mutation
 * of the same entity sees the first one's version.
 */

export interface Entity {
  version: number;
  components: Components;
}

/** The outcome of one mutation: its result and, when it succeeded, the entity's new state (null: deleted). */
export interface MutationOutcome {
  result: MutationResult;
  change: EntityChange | null;
  entity: Entity | null;
}

function failed(mutation: EntityMutation, current_version: number, error: NonNullable<MutationResult['error']>): MutationOutcome {
  return { result: { entity_id: mutation.entity_id, success: false, new_version: null, current_version, error }, change: null, entity: null };
}

function succeeded(mutation: EntityMutation, current_version: number, change: EntityChange, entity: Entity | null): MutationOutcome {
  return { result: { entity_id: mutation.entity_id, success: true, new_version: change.version, current_version, error: null }, change, entity };
}

/** Shallow merge: a component set to null is removed. */
export function mergeComponents(base: Components, patch: Components): Components {
  const merged: Components = { ...base };
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) delete merged[name];
    else merged[name] = value;
  }
  return merged;
}


/** `existing`: the entity now (undefined when absent); `liveEntities`: how many the index holds. */
export function applyMutation(mutation: EntityMutation, existing: Entity | undefined, liveEntities: number): MutationOutcome {
  const current_version = existing?.version ?? 0;
  switch (mutation.op) {
    case 'create': {
      if (existing) return failed(mutation, current_version, 'entity_exists');
      if (mutation.expected_version !== undefined && mutation.expected_version !== 0) return failed(mutation, 0, 'version_conflict');
      if (liveEntities >= ENTITIES_PER_INDEX_MAX) return failed(mutation, 0, 'index_full');
      const components = mergeComponents({}, mutation.components ?? {});
      if (serialisedBytes(components) > COMPONENTS_BYTES_MAX) return failed(mutation, 0, 'components_too_large');
      const entity = { version: 1, components };
      return succeeded(mutation, 0, { entity_id: mutation.entity_id, op: 'upsert', version: 1, components }, entity);
    }
    case 'update': {
      if (!existing) return failed(mutation, 0, 'entity_not_found');
      if (mutation.expected_version === undefined) return failed(mutation, current_version, 'version_required');
      if (mutation.expected_version !== existing.version) return failed(mutation, current_version, 'version_conflict');
      const components = mergeComponents(existing.components, mutation.components ?? {});
      if (serialisedBytes(components) > COMPONENTS_BYTES_MAX) return failed(mutation, current_version, 'components_too_large');
      const entity = { version: existing.version + 1, components };
      return succeeded(mutation, current_version, { entity_id: mutation.entity_id, op: 'upsert', version: entity.version, components }, entity);
    }
    case 'delete': {
      if (!existing) return failed(mutation, 0, 'entity_not_found');
      if (mutation.expected_version === undefined) return failed(mutation, current_version, 'version_required');
      if (mutation.expected_version !== existing.version) return failed(mutation, current_version, 'version_conflict');
      return succeeded(mutation, current_version, { entity_id: mutation.entity_id, op: 'delete', version: existing.version + 1 }, null);
    }
  }
}
