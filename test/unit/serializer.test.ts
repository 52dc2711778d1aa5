import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { nullableForSerializer, serializerFactory } from '../../http/serializer.js';
import { LazySchemas } from '../../http/lazy-schemas.js';

/** The serialiser's copy of a response schema: `nullable` for `anyOf [X, null]`, the same JSON out. */
const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);
const Status = Type.Object({
  key: Type.String(),
  is_locked: Type.Boolean(),
  lock_id: Nullable(Type.String()),
  expires_at: Nullable(Type.String({ format: 'date-time' })),
  count: Type.Union([Type.Null(), Type.Integer()]),
  tags: Type.Array(Type.Union([Type.String(), Type.Null()])),
  metadata: Type.Unknown(),
  either: Type.Union([Type.String(), Type.Integer()]),
});

describe('nullableForSerializer', () => {
  it('writes anyOf [X, null] as X with nullable, at any depth, and leaves other unions alone', () => {
    const copy = nullableForSerializer(Status) as { properties: Record<string, Record<string, unknown>> };
    expect(copy.properties.lock_id).toEqual({ type: 'string', nullable: true });
    expect(copy.properties.expires_at).toEqual({ type: 'string', format: 'date-time', nullable: true });
    expect(copy.properties.count).toEqual({ type: 'integer', nullable: true });
    expect(copy.properties.tags!.items).toEqual({ type: 'string', nullable: true });
    expect(copy.properties.either!.anyOf).toHaveLength(2);
    // The routes' schema is not changed (it is what /openapi.json shows).
    expect(Status.properties.lock_id.anyOf).toHaveLength(2);
  });

  it('serialises every value exactly as the schema as written does', () => {
    const route = { method: 'GET', url: '/x', httpStatus: '200', schema: Status };
    const rewritten = serializerFactory(new LazySchemas())(undefined, {})(route);
    const original = SerializerSelector()(undefined, {})(route);
    const values = [
      { key: 'k', is_locked: true, lock_id: 'lck_1', expires_at: '2026-11-27T10:00:00.000Z', count: 3, tags: ['a', null], metadata: { a: [1, null] }, either: 'x' },
      { key: 'k', is_locked: false, lock_id: null, expires_at: null, count: null, tags: [], metadata: null, either: 7 },
    ];
    for (const value of values) {
      expect(rewritten(value)).toBe(original(value));
      expect(JSON.parse(rewritten(value))).toEqual(value);
    }
  });
});
