import { describe, expect, it } from 'vitest';
import { qualifiedDetails, validationDetails } from '../../http/validation-details.js';

describe('validationDetails', () => {
  it('collapses a union of constants into one entry naming the allowed values', () => {
    const issues = [
      { keyword: 'const', instancePath: '/status', params: { allowedValue: 'open' }, message: 'must be equal to constant' },
      { keyword: 'const', instancePath: '/status', params: { allowedValue: 'closed' }, message: 'must be equal to constant' },
      { keyword: 'anyOf', instancePath: '/status', params: {}, message: 'must match a schema in anyOf' },
    ];
    expect(validationDetails('body', issues)).toEqual([{ field: 'body.status', message: 'must be one of: "open", "closed"' }]);
  });

  it('takes enum issues too, and keeps a union branch of another type as its own entry', () => {
    const issues = [
      { keyword: 'type', instancePath: '/mode', params: { type: 'null' }, message: 'must be null' },
      { keyword: 'enum', instancePath: '/mode', params: { allowedValues: [1, 2] }, message: 'must be equal to one of the allowed values' },
      { keyword: 'anyOf', instancePath: '/mode', params: {}, message: 'must match a schema in anyOf' },
    ];
    expect(validationDetails('querystring', issues)).toEqual([
      { field: 'querystring.mode', message: 'must be null' },
      { field: 'querystring.mode', message: 'must be one of: 1, 2' },
    ]);
  });

  it('keeps other issues once each, in order, with missing and unknown properties in the field', () => {
    const issues = [
      { keyword: 'required', instancePath: '', params: { missingProperty: 'owner_id' }, message: "must have required property 'owner_id'" },
      { keyword: 'required', instancePath: '', params: { missingProperty: 'owner_id' }, message: "must have required property 'owner_id'" },
      { keyword: 'additionalProperties', instancePath: '/meta', params: { additionalProperty: 'x' }, message: 'must NOT have additional properties' },
      { keyword: 'type', instancePath: '/ttl_seconds', params: { type: 'integer' } },
    ];
    expect(validationDetails(undefined, issues)).toEqual([
      { field: 'body.owner_id', message: 'is required' },
      { field: 'body.meta.x', message: 'is not allowed' },
      { field: 'body.ttl_seconds', message: 'is invalid' },
    ]);
  });
});

describe('field names', () => {
  it('decodes JSON pointer escapes: a key with / or ~ is named as sent', () => {
    const issues = [{ keyword: 'minimum', instancePath: '/custom_limits/~1a~0b/max_requests', params: {}, message: 'must be >= 1' }];
    expect(validationDetails('body', issues)).toEqual([{ field: 'body.custom_limits./a~b.max_requests', message: 'must be >= 1' }]);
  });

  it("qualifies a handler's bare field with the request part that holds it", () => {
    const request = { params: { user_id: 'u1' }, query: { page: '2' }, body: { name: 'n' } };
    const details = [{ field: 'user_id', message: 'x' }, { field: 'page', message: 'x' }, { field: 'custom_limits.nope', message: 'x' }, { field: 'body.name', message: 'x' }, { field: 'jobs[1].queue', message: 'x' }];
    expect(qualifiedDetails(details, request)).toEqual([
      { field: 'params.user_id', message: 'x' },
      { field: 'querystring.page', message: 'x' },
      { field: 'body.custom_limits.nope', message: 'x' },
      { field: 'body.name', message: 'x' },
      { field: 'body.jobs[1].queue', message: 'x' },
    ]);
    expect(qualifiedDetails({ missing: [] }, request)).toEqual({ missing: [] });
    // A field none holds (missing): the body's when there is one, else the query string's.
    expect(qualifiedDetails([{ field: 'client_id', message: 'x' }], { query: {} })).toEqual([{ field: 'querystring.client_id', message: 'x' }]);
    expect(qualifiedDetails([{ field: 'client_id', message: 'x' }], { query: {}, body: { other: 1 } })).toEqual([{ field: 'body.client_id', message: 'x' }]);
  });
});
