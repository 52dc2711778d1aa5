import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canTransition, conditionalErrors, conditionHolds, parseCondition, ruleProblems, STATUS_TRANSITIONS, takesSubmissions } from '../../actors/forms/definition.js';
import { FORM_STATUSES, formIdFor, tenantOfFormId, type FormStatus } from '../../actors/forms/messages.js';
import { compileSchema } from '../../actors/forms/schema-compiler.js';

/** The pure rules of a form: its status state machine, conditional logic, schema compiling, ids. */
describe('form status state machine', () => {
  it('has the documented table', () => {
    expect(STATUS_TRANSITIONS).toEqual({
      draft: ['active', 'disabled'],
      active: ['paused', 'deprecated', 'disabled'],
      paused: ['active', 'deprecated', 'disabled'],
      deprecated: ['active', 'disabled'],
      disabled: [],
    });
  });

  it('only active takes submissions', () => {
    expect(FORM_STATUSES.filter(takesSubmissions)).toEqual(['active']);
  });

  it('disabled is final and draft is never re-entered', () => {
    for (const to of FORM_STATUSES) {
      if (to !== 'disabled') expect(canTransition('disabled', to)).toBe(false);
    }
    for (const from of FORM_STATUSES) if (from !== 'draft') expect(canTransition(from, 'draft')).toBe(false);
  });

  it('any walk of allowed moves stays in the table, and staying put is allowed', () => {
    const status = fc.constantFrom(...FORM_STATUSES);
    fc.assert(
      fc.property(fc.array(status, { maxLength: 30 }), (targets) => {
        let current: FormStatus = 'draft';
        for (const target of targets) {
          const allowed = canTransition(current, target);
          expect(allowed).toBe(target === current || STATUS_TRANSITIONS[current].includes(target));
          if (allowed) current = target;
        }
        // Whatever the walk, a form reached active only from draft, paused or deprecated.
        expect(FORM_STATUSES).toContain(current);
      }),
    );
  });
});

describe('conditional logic', () => {
  it('parses the documented forms', () => {
    expect(parseCondition('newsletter')).toEqual({ field: 'newsletter', operator: 'present', value: null });
    expect(parseCondition('country == "US"')).toEqual({ field: 'country', operator: '==', value: 'US' });
    expect(parseCondition(' age >= 18 ')).toEqual({ field: 'age', operator: '>=', value: 18 });
    expect(parseCondition('address.country != null')).toEqual({ field: 'address.country', operator: '!=', value: null });
  });

  it('refuses what is not an expression', () => {
    for (const bad of ['', '== 3', 'country == US', 'age > "x"', 'a == {"b":1}', 'a b c', 'x'.repeat(600)]) {
      expect(parseCondition(bad), bad).toHaveProperty('error');
    }
  });

  it('evaluates', () => {
    const data = { country: 'US', age: 20, empty: '', list: [] as unknown[], nested: { x: 1 } };
    expect(conditionHolds({ field: 'country', operator: '==', value: 'US' }, data)).toBe(true);
    expect(conditionHolds({ field: 'country', operator: '!=', value: 'US' }, data)).toBe(false);
    expect(conditionHolds({ field: 'age', operator: '<', value: 18 }, data)).toBe(false);
    expect(conditionHolds({ field: 'age', operator: '>', value: 18 }, data)).toBe(true);
    expect(conditionHolds({ field: 'empty', operator: 'present', value: null }, data)).toBe(false);
    expect(conditionHolds({ field: 'list', operator: 'present', value: null }, data)).toBe(false);
    expect(conditionHolds({ field: 'nested.x', operator: '==', value: 1 }, data)).toBe(true);
    expect(conditionHolds({ field: 'missing', operator: '>', value: 1 }, data)).toBe(false);
  });

  it('requires fields only when the condition holds', () => {
    const rules = [{ when: 'country == "US"', require: ['state', 'zip'] }];
    expect(conditionalErrors(rules, { country: 'FR' })).toEqual([]);
    expect(conditionalErrors(rules, { country: 'US', state: 'CA', zip: '94000' })).toEqual([]);
    expect(conditionalErrors(rules, { country: 'US', state: 'CA' })).toEqual(['/zip is required when country == "US"']);
    expect(conditionalErrors(rules, { country: 'US', state: '' })).toHaveLength(2);
  });

  it('reads only the data\'s own properties: a path through an inherited one names nothing', () => {
    expect(conditionalErrors([{ when: 'meta.constructor', require: ['x'] }], { meta: {} })).toEqual([]);
    expect(conditionalErrors([{ when: 'country == "US"', require: ['meta.toString'] }], { country: 'US', meta: {} })).toEqual(['/meta/toString is required when country == "US"']);
  });

  it('a definition\'s rules must parse and name properties of the schema', () => {
    const properties = new Set(['country', 'state']);
    expect(ruleProblems([{ when: 'country == "US"', require: ['state'] }], properties)).toEqual([]);
    expect(ruleProblems([{ when: 'nope == 1', require: ['state'] }], properties)[0]).toMatch(/nope/);
    expect(ruleProblems([{ when: 'country', require: ['zip'] }], properties)[0]).toMatch(/zip/);
    expect(ruleProblems([{ when: 'country ==', require: ['state'] }], properties)[0]).toMatch(/when/);
  });

  it('never throws on any data', () => {
    const rules = [{ when: 'a > 3', require: ['b'] }, { when: 'c == "x"', require: ['d.e'] }, { when: 'f', require: ['g'] }];
    fc.assert(fc.property(fc.dictionary(fc.constantFrom('a', 'b', 'c', 'd', 'f', 'g'), fc.jsonValue()), (data) => {
      const errors = conditionalErrors(rules, data);
      expect(Array.isArray(errors)).toBe(true);
    }));
  });
});

describe('schema compiling', () => {
  it('compiles an object schema and validates with it', () => {
    const compiled = compileSchema({ type: 'object', properties: { email: { type: 'string', format: 'email' } }, required: ['email'] });
    if ('error' in compiled) throw new Error(compiled.error);
    expect(compiled.validate({ email: 'a@example.com' })).toBe(true);
    expect(compiled.validate({ email: 'nope' })).toBe(false);
  });

  it('refuses what ajv refuses, and non-object schemas', () => {
    expect(compileSchema({ type: 'object', properties: { a: { type: 'strnig' } } })).toHaveProperty('error');
    expect(compileSchema({ type: 'object', propertees: {} })).toHaveProperty('error');
    expect(compileSchema({ type: 'object', properties: { a: { $ref: 'https://example.com/x.json' } } })).toHaveProperty('error');
    expect(compileSchema({ type: 'string' })).toHaveProperty('error');
  });
});

describe('form ids', () => {
  it('carry their tenant, and nothing else is one', () => {
    fc.assert(fc.property(fc.string({ minLength: 1, maxLength: 80 }), (tenant) => {
      expect(tenantOfFormId(formIdFor(tenant, 'abc123'))).toBe(tenant);
    }));
    for (const bad of ['', 'frm_', 'frm_.x', 'abc', 'frm_YQ.', 'frm_YQ==.x', 'frm_YQ.x/y']) expect(tenantOfFormId(bad), bad).toBeNull();
  });
});

describe('job payload templates', () => {
  it('fills whole placeholders with values and inline ones with text', async () => {
    const { fillTemplate } = await import('../../actors/forms/payload-template.js');
    const source = { submission_id: 'sub_1', form_version: 2, data: { email: 'a@example.com', age: 30, tags: ['x'], nested: { k: true } } };
    expect(fillTemplate({ to: '{{data.email}}', age: '{{ data.age }}', tags: '{{data.tags}}', missing: '{{data.none}}', line: 'v{{form_version}}: {{data.nested}} {{data.none}}!', keep: [1, null, 'plain'] }, source)).toEqual({
      to: 'a@example.com', age: 30, tags: ['x'], missing: null, line: 'v2: {"k":true} !', keep: [1, null, 'plain'],
    });
  });
});
