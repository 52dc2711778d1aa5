import type { RecordsActorDefinition, SnapshotActorDefinition } from '../../runtime/index.js';
import { loadCatalog, stepCatalog, type CatalogState } from './catalog-state.js';
import { loadContainer, type ContainerState } from './container-state.js';
import { initialFirstState, stepFirst, type FirstState } from './first-state.js';
import { stepContainerFlows } from './flows.js';
import {
  ITEM_CATALOG_KIND,
  ITEM_CONTAINER_KIND,
  ITEM_FIRST_KIND,
  ITEM_PROGRESS_KIND,
  type CatalogMessage,
  type ContainerMessage,
  type FirstMessage,
  type ProgressMessage,
} from './messages.js';
import { loadProgress, stepProgress, type ProgressState } from './progress-state.js';

/** A domain's definitions, blueprints, collections and container registry; resolves the plans of grants and crafts. */
export const itemCatalogActor: RecordsActorDefinition<CatalogState, CatalogMessage, unknown> = {
  kind: ITEM_CATALOG_KIND,
  storage: 'records',
  load: loadCatalog,
  step: stepCatalog,
};

/** One container's items and the reservations of crafts in progress; coordinates grants into it and crafts from it (flows.ts). */
export const itemContainerActor: RecordsActorDefinition<ContainerState, ContainerMessage, unknown> = {
  kind: ITEM_CONTAINER_KIND,
  storage: 'records',
  load: loadContainer,
  step: stepContainerFlows,
};

/** Who was first to craft a blueprint output or reach a collection tier. */
export const itemFirstActor: SnapshotActorDefinition<FirstState, FirstMessage, unknown> = {
  kind: ITEM_FIRST_KIND,
  storage: 'snapshot',
  initial: initialFirstState,
  step: stepFirst,
};

/** A user's collection progress in a domain. */
export const itemProgressActor: RecordsActorDefinition<ProgressState, ProgressMessage, unknown> = {
  kind: ITEM_PROGRESS_KIND,
  storage: 'records',
  load: loadProgress,
  step: stepProgress,
};

export const itemActors = [itemCatalogActor, itemContainerActor, itemFirstActor, itemProgressActor];
