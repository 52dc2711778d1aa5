/**
 * The entry a plain-object record holds under `key` itself, or undefined:
 * never an inherited property, so a client's id such as `constructor` or
 * `toString` names no entry instead of Object.prototype's function.
 */
export function ownEntry<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}
