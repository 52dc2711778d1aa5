import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { areas } from '../../areas.js';
import { handlerWeights } from '../helpers/ask-weight.js';

/**
 * The area shape (docs/architecture.md, "The area shape"), checked on the
 * tree: every area in areas.ts has its folder, routes, docs page and tests,
 * nothing lives outside an area, and route handlers make one ask or start
 * one flow.
 */
const root = new URL('../..', import.meta.url).pathname;
const at = (...parts: string[]) => join(root, ...parts);

/** Folders of actors/ that hold the node's own kinds, not an area's. */
const NODE_FOLDERS = ['idempotency', 'system'];
/** Route files of the node itself (probes, cluster operations), not of an area. */
const NODE_ROUTES = ['health.ts', 'cluster.ts'];


describe('area shape', () => {
  it('areas have unique names', () => {
    const names = areas.map((area) => area.name);
    expect(new Set(names).size).toBe(names.length);
  });

  for (const area of areas) {
    describe(area.name, () => {
      it('has its routes, docs page, unit test and HTTP test', () => {
        expect(existsSync(at('http', 'routes', `${area.name}.ts`)), `http/routes/${area.name}.ts`).toBe(true);
        expect(existsSync(at('docs', 'api', `${area.name}.md`)), `docs/api/${area.name}.md`).toBe(true);
        const unit = readdirSync(at('test', 'unit')).filter((file) => file.startsWith(area.name) && file.endsWith('.test.ts'));
        const http = readdirSync(at('test', 'http')).filter((file) => file.startsWith(area.name) && file.endsWith('.test.ts'));
        expect(unit, `test/unit/${area.name}*.test.ts`).not.toEqual([]);
        expect(http, `test/http/${area.name}*.test.ts`).not.toEqual([]);
      });

      it('keeps its kinds in actors/<area>/ with messages.ts, actor.ts and pure state', () => {
        const folder = at('actors', area.name);
        if (area.actors.length === 0) return;
        expect(existsSync(folder), `actors/${area.name}/`).toBe(true);
        const files = readdirSync(folder);
        expect(files.some((file) => file === 'state.ts' || file.endsWith('-state.ts')), `actors/${area.name}/state.ts`).toBe(true);
        expect(files, `actors/${area.name}/messages.ts`).toContain('messages.ts');
        expect(files, `actors/${area.name}/actor.ts`).toContain('actor.ts');
      });

      it('route handlers make one ask or start one flow', () => {
        const file = at('http', 'routes', `${area.name}.ts`);
        const chains = handlerWeights(file, readFileSync(file, 'utf8')).filter((handler) => handler.weight > 1);
        expect(chains.map((h) => `${h.method.toUpperCase()} ${h.path} (line ${h.line}) sends ${h.weight}`)).toEqual([]);
      });
    });
  }

  it('every actors/ folder is an area or the node\'s own', () => {
    const names = new Set(areas.map((area) => area.name));
    for (const entry of readdirSync(at('actors'), { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      expect(names.has(entry.name) || NODE_FOLDERS.includes(entry.name), `actors/${entry.name}/ is in areas.ts`).toBe(true);
    }
  });

  it('every route file is an area\'s or the node\'s own', () => {
    const names = new Set(areas.map((area) => `${area.name}.ts`));
    for (const file of readdirSync(at('http', 'routes'))) {
      expect(names.has(file) || NODE_ROUTES.includes(file), `http/routes/${file} is in areas.ts`).toBe(true);
    }
  });

  it('the API reference index links every area page', () => {
    const index = readFileSync(at('docs', 'api', 'README.md'), 'utf8');
    for (const area of areas) expect(index, `docs/api/README.md links ${area.name}.md`).toContain(`(${area.name}.md)`);
  });

  it('the handler weight check sees chains', () => {
    // The check itself can fail: a handler with two asks, and one asking in a map.
    const text = `
      const get = (id) => actors.ask('k', id, {});
      app.post('/one', {}, async () => actors.ask('k', 'a', {}));
      app.post('/two', {}, async () => { await actors.ask('k', 'a', {}); return get('b'); });
      app.get('/many', {}, async () => Promise.all(ids.map((id) => get(id))));
      app.get('/gather', {}, async () => Promise.all(ids.map((id) => actors.ask('k', id, {}, { readOnly: true }))));`;
    expect(handlerWeights('x.ts', text).map((h) => [h.path, h.weight])).toEqual([['/one', 1], ['/two', 2], ['/many', 2], ['/gather', 0]]);
  });
});
