import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { LazySchemas } from '../../http/lazy-schemas.js';

const schema = { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } };

describe('LazySchemas', () => {
  it('compiles a validator on its first call, once, and passes its result and errors through', () => {
    const lazy = new LazySchemas();
    let compiles = 0;
    const validate = lazy.validator(() => {
      compiles++;
      return new Ajv().compile(schema);
    });
    expect(compiles).toBe(0);
    expect(lazy.pending).toBe(1);
    expect(validate({ n: 'x' })).toBe(false);
    expect(validate.errors).toEqual([expect.objectContaining({ instancePath: '/n', keyword: 'type' })]);
    expect(validate({ n: 1 })).toBe(true);
    expect(validate.errors).toBeNull();
    expect(compiles).toBe(1);
    expect(lazy.pending).toBe(0);
  });

  it('compiles a serialiser on its first call', () => {
    const lazy = new LazySchemas();
    let compiles = 0;
    const serialize = lazy.serializer(() => {
      compiles++;
      return (data) => JSON.stringify(data);
    });
    expect(compiles).toBe(0);
    expect(serialize({ a: 1 })).toBe('{"a":1}');
    expect(serialize({ a: 2 })).toBe('{"a":2}');
    expect(compiles).toBe(1);
  });

  it('compileAll compiles everything waiting and throws a schema that does not compile', () => {
    const lazy = new LazySchemas();
    lazy.validator(() => new Ajv().compile(schema));
    lazy.serializer(() => (data) => String(data));
    lazy.compileAll();
    expect(lazy.pending).toBe(0);
    lazy.validator(() => new Ajv().compile({ type: 'no-such-type' }));
    expect(() => lazy.compileAll()).toThrow();
  });

  it('warmUp compiles in the background, one schema per turn, and reports one that fails without stopping', async () => {
    const lazy = new LazySchemas();
    const order: string[] = [];
    lazy.validator(() => {
      order.push('a');
      return new Ajv().compile(schema);
    });
    const broken = lazy.validator(() => {
      order.push('b');
      return new Ajv().compile({ type: 'no-such-type' });
    });
    lazy.serializer(() => {
      order.push('c');
      return (data) => String(data);
    });
    const errors: unknown[] = [];
    let done: number | undefined;
    lazy.warmUp((error) => errors.push(error), (compiled) => (done = compiled));
    expect(order).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(order.length).toBeLessThan(3);
    while (lazy.pending > 0) await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual(['a', 'b', 'c']);
    expect(errors).toHaveLength(1);
    // It says when it is done, with the count it compiled (the broken one not counted).
    for (let turns = 0; done === undefined && turns < 10; turns++) await new Promise((resolve) => setImmediate(resolve));
    expect(done).toBe(2);
    // The broken schema's route fails on use, as it would have failed start-up.
    expect(() => broken({})).toThrow();
  });
});
