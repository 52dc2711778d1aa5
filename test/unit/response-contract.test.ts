import { describe, expect, it } from 'vitest';
import { contractOf } from '../helpers/response-contract.js';

/** The check every startTestNode answer goes through (test/helpers/response-contract.ts): it must be able to fail. */
const doc = {
  components: { schemas: { 'def-0': { title: 'Error', type: 'object', required: ['code'], properties: { code: { type: 'string' } } } } },
  paths: {
    '/api/v1/things/{id}': {
      get: {
        responses: {
          '200': { description: 'ok', content: { 'application/json': { schema: { type: 'object', required: ['id', 'n'], properties: { id: { type: 'string' }, n: { type: 'integer' } } } } } },
          '404': { description: 'no', content: { 'application/json': { schema: { $ref: '#/components/schemas/def-0' } } } },
        },
      },
    },
    '/api/v1/things/special': { get: { responses: { '204': { description: 'none' } } } },
  },
};
const contract = contractOf(JSON.stringify(doc));
const json = 'application/json; charset=utf-8';
const check = (path: string, status: number, body: unknown) => contract.check('GET', path, status, json, body, body === undefined ? '' : JSON.stringify(body));

describe('the response contract check', () => {
  it('passes an answer the document declares, with a body of its schema', () => {
    expect(check('/api/v1/things/t1', 200, { id: 't1', n: 3 })).toBeUndefined();
    expect(check('/api/v1/things/t1', 404, { code: 'not_found' })).toBeUndefined();
    expect(check('/api/v1/things/t1?x=1', 200, { id: 't1', n: 3 })).toBeUndefined();
  });

  it('names a status the operation does not declare', () => {
    expect(check('/api/v1/things/t1', 409, { code: 'conflict' })).toMatch(/^GET \/api\/v1\/things\/\{id\} 409: the status is not declared/);
  });

  it('names where a body leaves its schema, through references too', () => {
    expect(check('/api/v1/things/t1', 200, { id: 't1', n: 1.5 })).toMatch(/at \/n: must be integer/);
    expect(check('/api/v1/things/t1', 200, { id: 't1' })).toMatch(/must have required property 'n'/);
    expect(check('/api/v1/things/t1', 404, { message: 'x' })).toMatch(/must have required property 'code'/);
  });

  it('takes the most literal template first, and leaves routes the document does not list alone', () => {
    expect(check('/api/v1/things/special', 204, undefined)).toBeUndefined();
    expect(check('/api/v1/things/special', 200, { id: 'special', n: 1 })).toMatch(/special 200: the status is not declared/);
    expect(check('/console/index.html', 200, {})).toBeUndefined();
  });

  it('is built once per document text', () => {
    expect(contractOf(JSON.stringify(doc))).toBe(contract);
  });
});
