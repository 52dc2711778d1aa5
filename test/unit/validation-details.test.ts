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

  it('takes enum issues too, and a null branch joins the allowed values', () => {
    const issues = [
      { keyword: 'type', instancePath: '/mode', params: { type: 'null' }, message: 'must be null' },
      { keyword: 'enum', instancePath: '/mode', params: { allowedValues: [1, 2] }, message: 'must be equal to one of the allowed values' },
      { keyword: 'anyOf', instancePath: '/mode', params: {}, message: 'must match a schema in anyOf' },
    ];
    expect(validationDetails('querystring', issues)).toEqual([{ field: 'querystring.mode', message: 'must be one of: 1, 2, null' }]);
  });

  it('names the types a union takes in one entry, or only the reason a branch of the right type gave', () => {
    const wrongType = [
      { keyword: 'type', instancePath: '/expires_at', params: { type: 'string' }, message: 'must be string' },
      { keyword: 'type', instancePath: '/expires_at', params: { type: 'null' }, message: 'must be null' },
      { keyword: 'anyOf', instancePath: '/expires_at', params: {}, message: 'must match a schema in anyOf' },
    ];
    expect(validationDetails('body', wrongType)).toEqual([{ field: 'body.expires_at', message: 'must be string or null' }]);
    const badDate = [
      { keyword: 'format', instancePath: '/expires_at', params: { format: 'date-time' }, message: 'must match format "date-time"' },
      { keyword: 'type', instancePath: '/expires_at', params: { type: 'null' }, message: 'must be null' },
      { keyword: 'anyOf', instancePath: '/expires_at', params: {}, message: 'must match a schema in anyOf' },
    ];
    expect(validationDetails('body', badDate)).toEqual([{ field: 'body.expires_at', message: 'must match format "date-time"' }]);
    // Outside a union, a type issue is its own entry, as before.
    expect(validationDetails('body', [{ keyword: 'type', instancePath: '/n', params: { type: 'integer' }, message: 'must be integer' }])).toEqual([{ field: 'body.n', message: 'must be integer' }]);
    // A union of objects whose branches fail inside them: the inner issues stay, and the union's own line after them.
    const objects = [
      { keyword: 'required', instancePath: '/target', params: { missingProperty: 'url' }, message: "must have required property 'url'" },
      { keyword: 'required', instancePath: '/target', params: { missingProperty: 'queue' }, message: "must have required property 'queue'" },
      { keyword: 'oneOf', instancePath: '/target', params: {}, message: 'must match exactly one schema in oneOf' },
    ];
    expect(validationDetails('body', objects)).toEqual([
      { field: 'body.target.url', message: 'is required' },
      { field: 'body.target.queue', message: 'is required' },
      { field: 'body.target', message: 'must match exactly one schema in oneOf' },
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
