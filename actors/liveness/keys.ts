/** Actor kinds and keys of the liveness area (every key carries the tenant). */
export const LIVENESS_KIND = 'liveness';
export const LIVENESS_INDEX_KIND = 'liveness-index';

/** One actor per (tenant, entity). */
export function livenessActorKey(tenant: string, entity_id: string): string {
  return JSON.stringify([tenant, entity_id]);
}

/** One index actor per tenant. */
export function livenessIndexKey(tenant: string): string {
  return JSON.stringify([tenant]);
}
