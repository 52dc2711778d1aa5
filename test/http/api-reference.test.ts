import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDocBlocks } from '../../http/api-reference/doc-blocks.js';
import { docsApiDir, readDocPages } from '../../http/api-reference/doc-pages.js';
import { addFormats } from '../../http/plugins/validation.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * What /openapi.json (and /docs, which renders it) says beyond the route schemas: every body has
 * examples that validate, the docs/api pages reach the operations and tags, bearerAuth is declared
 * where a token is needed. And /docs itself: served with its assets, off with DOCS_UI=0.
 */

interface Operation {
  description?: string;
  security?: Record<string, string[]>[];
  tags?: string[];
  requestBody?: { content: Record<string, { schema: Record<string, unknown>; examples?: Record<string, { summary: string; value: unknown }> }> };
}
interface Document {
  info: { description: string };
  tags?: { name: string; description?: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas?: Record<string, unknown> };
}

let t: TestNode;
let doc: Document;

const operations = () => Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ method, path, op })));
const operation = (method: string, path: string) => {
  const op = doc.paths[path]?.[method.toLowerCase()];
  if (!op) throw new Error(`${method} ${path} is not in /openapi.json`);
  return op;
};
const page = (file: string) => readFileSync(join(docsApiDir()!, file), 'utf8');

beforeAll(async () => {
  t = await startTestNode();
  doc = (await t.request('GET', '/openapi.json')).body;
});
afterAll(async () => {
  await t?.destroy();
});

describe('request examples', () => {
  it('every operation with a request body has examples, and each one validates against its schema', () => {
    // The node's body validator (http/plugins/validation.ts): ajv, ajv-formats, no coercion.
    const ajv = new Ajv({ strict: false, coerceTypes: false, useDefaults: false });
    addFormats(ajv);
    const failures: string[] = [];
    let checked = 0;
    for (const { method, path, op } of operations()) {
      if (!op.requestBody) continue;
      for (const [type, media] of Object.entries(op.requestBody.content)) {
        const examples = Object.entries(media.examples ?? {});
        if (examples.length === 0) failures.push(`${method} ${path} ${type}: no example`);
        const validate = ajv.compile({ ...media.schema, components: doc.components });
        for (const [name, example] of examples) {
          checked++;
          if (!validate(example.value)) failures.push(`${method} ${path} example ${name}: ${ajv.errorsText(validate.errors)} in ${JSON.stringify(example.value)}`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(checked).toBeGreaterThan(150);
  });

  it('takes a request example from the docs page when the page shows a valid body', () => {
    const examples = operation('POST', '/api/v1/mq/queues').requestBody!.content['application/json']!.examples!;
    expect(examples.docs).toEqual({ summary: 'From docs/api/mq.md', value: { name: 'orders', visibility_timeout_seconds: 60, max_receive_count: 5, dead_letter_queue: 'orders-dlq' } });
    expect(page('mq.md')).toContain('{"name": "orders", "visibility_timeout_seconds": 60, "max_receive_count": 5, "dead_letter_queue": "orders-dlq"}');
  });
});

describe('the docs pages in the document', () => {
  it('puts the section of its docs page in the description of named operations', () => {
    const cases: [string, string, string, string][] = [
      ['POST', '/api/v1/auth/login', 'accounts.md', '## `POST /api/v1/auth/login`'],
      ['POST', '/api/v1/distributed-state/{namespace}/{key}/lock', 'locks.md', '- Held by another owner: 409 `lock_held`.'],
      ['GET', '/api/v1/liveness/{entity_id}/uptime', 'liveness.md', '## `GET /api/v1/liveness/{entity_id}/uptime`'],
      ['POST', '/api/v1/items/{domain}/definitions', 'items.md', '| `max_stack` | int 1..1,000,000 | required | units per stack |'],
      ['DELETE', '/api/v1/jobs/{job_id}', 'jobs.md', 'entry too); a job in **processing** answers 409 `job_not_cancellable`.'],
    ];
    for (const [method, path, file, text] of cases) {
      expect(page(file)).toContain(text);
      expect(operation(method, path).description, `${method} ${path}`).toContain(text);
      expect(operation(method, path).description).toContain(`From docs/api/${file}`);
    }
  });

  it('gives every block of every docs/api page to an operation, a tag or the document', () => {
    const everything = [doc.info.description, ...(doc.tags ?? []).map((tag) => tag.description ?? ''), ...operations().map(({ op }) => op.description ?? '')].join('\n');
    const missing: string[] = [];
    const pages = readDocPages(docsApiDir()!);
    for (const { file, markdown } of pages) {
      for (const block of parseDocBlocks(markdown)) {
        if (block.kind !== 'heading' && !everything.includes(block.text)) missing.push(`${file}: ${block.text.slice(0, 80)}`);
      }
    }
    expect(missing).toEqual([]);
    expect(pages.length).toBeGreaterThan(30);
  });

  it('describes every tag from its pages and the document from common.md', () => {
    const described = new Map((doc.tags ?? []).map((tag) => [tag.name, tag.description ?? '']));
    const used = new Set(operations().flatMap(({ op }) => op.tags ?? []));
    for (const tag of used) if (tag !== 'health') expect(described.get(tag), tag).toMatch(/^<details><summary>The area's model and decisions \(docs\/api\/[a-z0-9-]+\.md/);
    expect(described.get('mq')).toContain('*docs/api/mq.md*');
    expect(doc.info.description).toContain('# Conventions common to every endpoint');
  });
});

describe('bearerAuth', () => {
  it('is declared by every operation that asks for a bearer token', async () => {
    const undeclared: string[] = [];
    for (const { method, path, op } of operations()) {
      if (op.security) continue;
      const res = await t.request(method.toUpperCase(), path.replace(/\{[^}]+\}/g, 'x1'));
      if (res.status === 401 && /bearer/i.test(res.body?.message ?? '')) undeclared.push(`${method} ${path}`);
    }
    expect(undeclared).toEqual([]);
    expect(operation('GET', '/api/v1/auth/me').security).toEqual([{ bearerAuth: [] }]);
    expect((await t.request('GET', '/api/v1/auth/me')).status).toBe(401);
  });
});

describe('GET /docs', () => {
  it('serves the page and its assets from the node, rendering /openapi.json, itself not in it', async () => {
    const html = await t.request('GET', '/docs');
    expect(html.status).toBe(200);
    expect(html.text).toContain('swagger-ui-bundle.js');
    const bundle = await t.request('GET', '/docs/static/swagger-ui-bundle.js');
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get('content-type')).toMatch(/javascript/);
    expect(bundle.text.length).toBeGreaterThan(100_000);
    expect((await t.request('GET', '/docs/json')).body).toEqual(doc);
    expect(Object.keys(doc.paths).filter((path) => path.startsWith('/docs'))).toEqual([]);
  });

  it('is off with DOCS_UI=0, /openapi.json still served', async () => {
    const off = await startTestNode({ config: { docsUi: false } });
    try {
      expect((await off.request('GET', '/docs')).status).toBe(404);
      expect((await off.request('GET', '/docs/static/swagger-ui-bundle.js')).status).toBe(404);
      expect((await off.request('GET', '/openapi.json')).status).toBe(200);
    } finally {
      await off.destroy();
    }
  });
});
