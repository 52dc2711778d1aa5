import { rollChances } from './chance.js';
import { collectionRules, collectionsOf, requireBlueprint, requireContainer, requireDefinition, type CatalogState } from './catalog-state.js';
import { firstSubjectKey, type CollectionRule, type CraftPlan, type Definition, type GrantPlan, type Placement, type SalvagePlan } from './messages.js';
import { ServiceError } from '../../runtime/index.js';

/**
 * What the catalog resolves for a grant or a craft, from its state alone (a
 * read: it changes nothing). The container that carries the operation out
 * checks its own rules (capacity, inputs) in its turn; the plan brings what
 * only the catalog knows: the definitions' units, the containers' configs,
 * the blueprint (its version recorded), the seeded chance rolls, the
 * collections concerned and which first claims are known to be taken.
 */
export function placementOf(state: CatalogState, definition: Definition, quantity: number, durability_pct: number): Placement {
  const max = definition.default_durability;
  return {
    unit: {
      definition_id: definition.definition_id,
      stackable: definition.stackable,
      max_stack: definition.max_stack,
      weight_m: definition.weight_m,
      volume_m: definition.volume_m,
      durability: max === null ? null : { current: Math.floor((max * durability_pct) / 100), max },
      collection_tags: collectionsOf(state, definition.definition_id),
    },
    quantity,
  };
}

/** First-claim subjects of these outputs and of the rules' tiers that the catalog knows are taken. */
function knownClaimed(state: CatalogState, blueprint_id: string | null, outputs: string[], rules: CollectionRule[]): string[] {
  const keys: string[] = [];
  if (blueprint_id !== null) for (const definition_id of outputs) keys.push(firstSubjectKey(['output', blueprint_id, definition_id]));
  for (const rule of rules) for (const tier of rule.tiers) keys.push(firstSubjectKey(['tier', rule.collection_id, tier.required]));
  return keys.filter((key) => state.claimed.has(key));
}

export function grantPlan(state: CatalogState, container_id: string, definition_id: string, quantity: number): GrantPlan {
  const definition = requireDefinition(state, definition_id, 'body.definition_id');
  const container = requireContainer(state, container_id, 'body.container_id');
  const rules = collectionRules(state, [definition_id]);
  return {
    container,
    placement: placementOf(state, definition, quantity, 100),
    quantity: { definition_id, quantity },
    rules,
    claimed: knownClaimed(state, null, [], rules),
  };
}

export function craftPlan(state: CatalogState, blueprint_id: string, source_container_id: string, target_container_id: string, seed: number): CraftPlan {
  const blueprint = requireBlueprint(state, blueprint_id);
  const source = requireContainer(state, source_container_id, 'body.source_container_id');
  const target = requireContainer(state, target_container_id, 'body.target_container_id');
  const consumed = new Map<string, number>();
  for (const input of blueprint.inputs) consumed.set(input.value, (consumed.get(input.value) ?? 0) + input.quantity);
  const rolls = rollChances(seed, blueprint.outputs.map((output) => output.chance));
  const placements: Placement[] = [];
  blueprint.outputs.forEach((output, index) => {
    if (!rolls[index]) return;
    // Outputs name existing definitions: a definition a blueprint names cannot be deleted.
    placements.push(placementOf(state, requireDefinition(state, output.definition_id), output.quantity, output.initial_durability_pct));
  });
  const outputs = [...new Set(placements.map((placement) => placement.unit.definition_id))];
  const rules = collectionRules(state, outputs);
  return {
    blueprint_id,
    blueprint_version: blueprint.version,
    seed,
    source,
    target,
    consumed: [...consumed].map(([definition_id, quantity]) => ({ definition_id, quantity })),
    placements,
    rules,
    claimed: knownClaimed(state, blueprint_id, outputs, rules),
  };
}

/**
 * Salvage: every unit rolls each of the definition's salvage outputs' chances
 * (in unit order, then output order, from one seeded generator), and the
 * successes add up per output.
 */
export function salvagePlan(state: CatalogState, container_id: string, definition_id: string, quantity: number, seed: number): SalvagePlan {
  const container = requireContainer(state, container_id, 'body.container_id');
  const definition = requireDefinition(state, definition_id);
  if (definition.salvage_outputs.length === 0) {
    throw new ServiceError('items_not_salvageable', `Definition ${JSON.stringify(definition_id)} has no salvage outputs.`);
  }
  const chances = Array.from({ length: quantity }, () => definition.salvage_outputs.map((output) => output.chance)).flat();
  const rolls = rollChances(seed, chances);
  const outputs: Placement[] = [];
  definition.salvage_outputs.forEach((output, index) => {
    let successes = 0;
    for (let unit = 0; unit < quantity; unit++) if (rolls[unit * definition.salvage_outputs.length + index]) successes++;
    if (successes === 0) return;
    outputs.push(placementOf(state, requireDefinition(state, output.definition_id), output.quantity * successes, 100));
  });
  return { container, definition_id, quantity, seed, outputs };
}
