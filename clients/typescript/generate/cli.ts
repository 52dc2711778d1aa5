import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildOpenApiDocument } from './openapi-document.js';
import { errorCodesSource, schemaSource } from './schema-source.js';

/**
 * `npm run client:generate`: rewrites the client's generated sources from the
 * current routes. Run it after changing a route schema or an error code; the
 * generation check (test/client/generation.test.ts) fails until you do.
 */

/** clients/typescript/src, from the source tree or from its compiled copy under dist/. */
export function generatedSourceDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const root = here.includes(`${join('dist', 'clients')}`) ? join(here, '..', '..', '..', '..') : join(here, '..', '..', '..');
  return join(root, 'clients', 'typescript', 'src');
}

async function main(): Promise<void> {
  const dir = generatedSourceDir();
  const document = await buildOpenApiDocument();
  writeFileSync(join(dir, 'schema.ts'), await schemaSource(document));
  writeFileSync(join(dir, 'error-codes.ts'), errorCodesSource());
  const methods = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options']);
  const operations = Object.values(document.paths as Record<string, object>).reduce((n, item) => n + Object.keys(item).filter((key) => methods.has(key)).length, 0);
  console.log(`wrote ${join(dir, 'schema.ts')} (${operations} operations) and error-codes.ts`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
