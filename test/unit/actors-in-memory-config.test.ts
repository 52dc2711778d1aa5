import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../http/config.js';
import { limits } from '../../runtime/limits.js';

describe('ACTORS_IN_MEMORY_MAX', () => {
  it('defaults to the runtime limit and reads the variable', () => {
    expect(loadConfig({}).actorsInMemoryMax).toBe(limits.activations_max);
    expect(loadConfig({ ACTORS_IN_MEMORY_MAX: '250000' }).actorsInMemoryMax).toBe(250_000);
  });
  it('refuses values that are not a count of at least 1,000', () => {
    for (const raw of ['10', '-5', 'many', '1.5e3x']) expect(() => loadConfig({ ACTORS_IN_MEMORY_MAX: raw })).toThrow(/ACTORS_IN_MEMORY_MAX/);
  });
});
