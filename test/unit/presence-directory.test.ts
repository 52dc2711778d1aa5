import { describe, expect, it } from 'vitest';
import { PRESENCE_DIRECTORY_KIND, presenceDirectoryKey } from '../../actors/presence/messages.js';
import { loadPresenceDirectory, stepPresenceDirectory } from '../../actors/presence/directory-state.js';
import { fixedContext } from '../helpers/step.js';

/** The tenant's presence directory: what GET /admin/presence/contexts pages through. */
const context = fixedContext(Date.UTC(2026, 0, 1), PRESENCE_DIRECTORY_KIND, presenceDirectoryKey('t'));

describe('presence directory', () => {
  it('lists context ids in order, each once, and reloads from its records', () => {
    let state = loadPresenceDirectory(presenceDirectoryKey('t'), []);
    const records: [string, unknown][] = [];
    for (const id of ['lobby', 'doc:7', 'lobby', 'arena']) {
      const result = stepPresenceDirectory(state, { op: 'add', context_id: id }, context);
      state = result.state;
      for (const write of result.writes ?? []) records.push([write.subkey, write.value]);
    }
    expect(records).toHaveLength(3);
    expect(stepPresenceDirectory(state, { op: 'list', offset: 0, limit: 10 }, context).reply).toEqual({ total: 3, context_ids: ['arena', 'doc:7', 'lobby'] });
    expect(stepPresenceDirectory(state, { op: 'list', offset: 2, limit: 10 }, context).reply).toEqual({ total: 3, context_ids: ['lobby'] });
    const reloaded = loadPresenceDirectory(presenceDirectoryKey('t'), records.reverse());
    expect(stepPresenceDirectory(reloaded, { op: 'list', offset: 0, limit: 2 }, context).reply).toEqual({ total: 3, context_ids: ['arena', 'doc:7'] });
  });
});
