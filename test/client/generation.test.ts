import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from '../../clients/typescript/generate/openapi-document.js';
import { errorCodesSource, schemaSource } from '../../clients/typescript/generate/schema-source.js';
import { startTestNode, type TestNode } from '../helpers/node.js';

/**
 * The generation check: the client's committed generated sources are what the
 * current routes and error registry generate. A route schema changed without
 * regenerating fails here.
 */

let t: TestNode;
let document: Record<string, unknown>;
beforeAll(async () => {
  t = await startTestNode();
  document = await buildOpenApiDocument();
});
afterAll(() => t?.destroy());

function firstDifference(committed: string, expected: string): string {
  const a = committed.split('\n');
  const b = expected.split('\n');
  for (let line = 0; line < Math.max(a.length, b.length); line++) {
    if (a[line] !== b[line]) return `line ${line + 1}: committed ${JSON.stringify(a[line] ?? '<end of file>')}, generated ${JSON.stringify(b[line] ?? '<end of file>')}`;
  }
  return 'none';
}

function expectCommitted(file: string, expected: string): void {
  const committed = readFileSync(new URL(`../../clients/typescript/src/${file}`, import.meta.url), 'utf8');
  if (committed !== expected) {
    expect.fail(
      `clients/typescript/src/${file} is not what the current routes generate: run \`npm run client:generate\` and commit the result.\n` +
        `First difference, ${firstDifference(committed, expected)}`,
    );
  }
}

describe('typed client generation', () => {
  it('generates from the same document a node serves at /openapi.json', async () => {
    const served = await t.request('GET', '/openapi.json');
    expect(served.status).toBe(200);
    expect(served.body).toEqual(document);
  });

  it('has committed clients/typescript/src/schema.ts as generated', async () => {
    expectCommitted('schema.ts', await schemaSource(document));
  });

  it('has committed clients/typescript/src/error-codes.ts as generated', () => {
    expectCommitted('error-codes.ts', errorCodesSource());
  });
});
