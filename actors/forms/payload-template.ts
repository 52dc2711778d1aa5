import { valueAt } from './definition.js';

/**
 * Fills a job hook's payload template from the submission (docs/api/forms.md,
 * "Execution hooks"): a string that is exactly `{{path}}` becomes the value
 * at that path (any JSON type; null when absent); `{{path}}` inside a longer
 * string is replaced by the value's text (JSON for objects and arrays, empty
 * when absent). Paths: submission_id, form_id, form_version, submitted_by,
 * anonymous, created_at_ms, data.<field>[.<nested>]. Pure; depth-bounded by
 * the template, which the edge bounds in size.
 */
const WHOLE = /^\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}$/;
const INLINE = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;

export function fillTemplate(template: unknown, source: Record<string, unknown>): unknown {
  if (typeof template === 'string') {
    const whole = WHOLE.exec(template);
    if (whole) return valueAt(source, whole[1]) ?? null;
    return template.replace(INLINE, (_match, path: string) => {
      const value = valueAt(source, path);
      return value === undefined || value === null ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);
    });
  }
  if (Array.isArray(template)) return template.map((item) => fillTemplate(item, source));
  if (template !== null && typeof template === 'object') {
    return Object.fromEntries(Object.entries(template).map(([key, value]) => [key, fillTemplate(value, source)]));
  }
  return template;
}
