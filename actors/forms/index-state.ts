import type { AlarmMessage, TurnContext, TurnResult } from '../../runtime/index.js';
import { formPolicy, type FormIndexMessage, type FormListQuery, type FormView, type Page } from './messages.js';

/**
 * A tenant's forms for listing: pure domain logic of the `form-index` actor
 * (storage `records`, key = formIndexKey(tenant), one record `f:<form_id>`).
 * Each form sends its view after every definition change (through the
 * outbox); the newest revision wins, so a late duplicate changes nothing.
 * `submission_count` in the list is as of the form's last definition change
 * (GET the form for the live count).
 */
export interface FormIndexState {
  forms: Map<string, FormView>;
}

const INACTIVE = new Set(['deprecated', 'disabled']);

export function loadFormIndex(_key: string, records: Iterable<[string, unknown]>): FormIndexState {
  const state: FormIndexState = { forms: new Map() };
  for (const [subkey, value] of records) if (subkey.startsWith('f:')) state.forms.set(subkey.slice(2), value as FormView);
  return state;
}

export function listForms(state: FormIndexState, query: FormListQuery): Page<FormView> {
  const q = query.q?.toLowerCase() ?? null;
  const matching = [...state.forms.values()].filter(
    (form) =>
      (query.status !== null ? form.status === query.status : query.include_inactive || !INACTIVE.has(form.status)) &&
      (q === null || form.name.toLowerCase().includes(q) || form.title.toLowerCase().includes(q)),
  );
  const sign = query.sort_order === 'asc' ? 1 : -1;
  const key = query.sort_by;
  matching.sort((a, b) => {
    const order = key === 'name' || key === 'title' ? a[key].localeCompare(b[key]) : key === 'updated_at' ? a.updated_at_ms - b.updated_at_ms : a.created_at_ms - b.created_at_ms;
    return (order || (a.form_id < b.form_id ? -1 : a.form_id > b.form_id ? 1 : 0)) * sign;
  });
  const start = (query.page - 1) * query.page_size;
  return { items: matching.slice(start, start + query.page_size), total: matching.length };
}

export function stepFormIndex(state: FormIndexState, message: FormIndexMessage | AlarmMessage, _context: TurnContext): TurnResult<FormIndexState, unknown> {
  switch (message.op) {
    case 'upsert': {
      const known = state.forms.get(message.form.form_id);
      if (known && known.revision >= message.form.revision) return { state, reply: { applied: false } };
      if (!known && state.forms.size >= formPolicy.forms_per_tenant_max) return { state, reply: { applied: false } };
      state.forms.set(message.form.form_id, message.form);
      return { state, reply: { applied: true }, writes: [{ subkey: `f:${message.form.form_id}`, value: message.form }] };
    }
    case 'list':
      return { state, reply: listForms(state, message.query) };
    default:
      return { state };
  }
}
