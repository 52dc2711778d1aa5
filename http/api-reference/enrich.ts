import { Ajv, type ValidateFunction } from 'ajv';
import formatsPlugin from 'ajv-formats';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { isBearerAuthentication } from '../plugins/authenticate.js';
import { bearerSecurity } from '../schemas.js';
import { COMMON_PAGE, docsApiDir, pagesOfTag, readDocPages } from './doc-pages.js';
import { assignDocs, operationKey, type DocOperation } from './operation-docs.js';
import { exampleFor, type JsonSchema } from './request-example.js';

/** The validator the node applies to bodies (http/plugins/validation.ts), without defaults filled in. */
function bodyValidator(): Ajv {
  const ajv = new Ajv({ allErrors: false, useDefaults: false, removeAdditional: false, strict: false, coerceTypes: false });
  const addFormats = (formatsPlugin as unknown as { default: (ajv: Ajv) => Ajv }).default ?? formatsPlugin;
  addFormats(ajv);
  return ajv;
}

function onRequestHooks(route: RouteOptions): unknown[] {
  const hooks = route.onRequest;
  return Array.isArray(hooks) ? hooks : hooks ? [hooks] : [];
}

/** Fenced JSON in a page's text, each block parsed; what does not parse is not an example. */
function jsonBlocks(text: string): unknown[] {
  const found: unknown[] = [];
  for (const match of text.matchAll(/```[a-z]*\n([\s\S]*?)```/g)) {
    // A block may open with the request line ("POST /api/v1/items/rpg/definitions"): the JSON follows it.
    const body = match[1]!.slice(Math.max(0, match[1]!.search(/^[{[]/m)));
    try {
      found.push(JSON.parse(body));
    } catch {
      // Not JSON (a shell session, an elided "{...}"): skipped.
    }
  }
  return found;
}

/** The page's JSON is a body of this operation, not its answer: only fields the body declares, and valid. */
function isBodyExample(value: unknown, body: JsonSchema, validate: ValidateFunction): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const properties = body.properties as Record<string, unknown> | undefined;
  if (properties && !Array.isArray(value) && Object.keys(value).some((key) => !(key in properties))) return false;
  return validate(value) === true;
}

/** What the document does not tell about a route: its bearer authentication and its body schema as written. */
interface RouteFacts {
  bearer: boolean;
  body: JsonSchema | undefined;
}

interface OpenApiOperation {
  tags?: string[];
  description?: string;
  security?: unknown[];
  requestBody?: { content?: Record<string, { schema?: JsonSchema; example?: unknown; examples?: Record<string, { summary?: string; value: unknown }> }> };
}

interface OpenApiDocument {
  info: { description?: string };
  tags?: { name: string; description?: string }[];
  paths: Record<string, Record<string, OpenApiOperation>>;
}

/** A route's URL as @fastify/swagger writes it: `:id` becomes `{id}`, a wildcard `{*}`. */
function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*/g, '{*}');
}

/**
 * What /openapi.json (and so /docs) says beyond the route schemas, added to the document once it
 * is built (the route schemas, which validate requests, are left alone):
 * - `security: bearerAuth` on every operation whose route's onRequest is bearer authentication
 *   and whose schema does not say otherwise, so "Authorize" in /docs sends the token;
 * - the operation's `description`: the text of its docs/api page that names it
 *   (operation-docs.ts), after the schema's own; each tag's description: the rest of its pages
 *   (the area's model and "not shown" decisions); docs/api/common.md joins the document's description;
 * - request body examples: the JSON its docs page shows for it, when that JSON is a valid body,
 *   and one built from the body schema (request-example.ts).
 * `app.swagger()` is wrapped: every reader of the JSON document (/openapi.json, /docs/json) gets
 * it enriched, whatever transforms the swagger registration has (the YAML form, /docs/yaml, is
 * not). Registered before the routes: the onRoute hook sees only the routes added after it.
 */
export function registerOpenApiEnrichment(app: FastifyInstance): void {
  const facts = new Map<string, RouteFacts>();
  const enriched = new WeakSet<object>();
  const ajv = bodyValidator();

  app.addHook('onRoute', (route) => {
    const schema = (route.schema ?? {}) as Record<string, unknown>;
    const bearer = onRequestHooks(route).some(isBearerAuthentication);
    const body = typeof schema.body === 'object' && schema.body !== null ? (schema.body as JsonSchema) : undefined;
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      facts.set(operationKey(method, openApiPath(route.url)), { bearer, body });
    }
  });

  const enrich = (doc: OpenApiDocument): void => {
    const operations: (DocOperation & { op: OpenApiOperation })[] = [];
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) operations.push({ method, path, tags: op.tags ?? [], op });
    }
    const dir = docsApiDir();
    if (!dir) app.log.warn('docs/api not found next to the build: /openapi.json has no page text in its descriptions');
    const docs = assignDocs(dir ? readDocPages(dir) : [], operations, pagesOfTag);

    const common = docs.remainders.get(COMMON_PAGE);
    if (common) doc.info.description = [doc.info.description, common].filter(Boolean).join('\n\n');
    const tags = doc.tags ?? (doc.tags = []);
    for (const tag of new Set(operations.flatMap((operation) => operation.tags))) {
      if (tags.some((known) => known.name === tag)) continue;
      const text = pagesOfTag(tag)
        .filter((file) => docs.remainders.get(file))
        .map((file) => `*docs/api/${file}*\n\n${docs.remainders.get(file)}`)
        .join('\n\n');
      // Folded: Swagger UI shows a tag's description in its header, above its operations, and
      // 20 areas' pages unfolded would bury the operations.
      const folded = text && `<details><summary>The area's model and decisions (${pagesOfTag(tag).map((file) => `docs/api/${file}`).join(', ')})</summary>\n\n${text}\n\n</details>`;
      tags.push(folded ? { name: tag, description: folded } : { name: tag });
    }

    for (const { method, path, tags: opTags, op } of operations) {
      const key = operationKey(method, path);
      const parts = docs.operations.get(key) ?? [];
      const area = opTags[0] ? ` The area's model, rules and decisions: the **${opTags[0]}** section's description.` : '';
      const footer = parts.length > 0 ? `*From docs/api/${[...new Set(parts.map((part) => part.file))].join(', docs/api/')}.${area}*` : `*No section of docs/api names this operation.${area}*`;
      op.description = [op.description, ...parts.map((part) => part.text), footer].filter(Boolean).join('\n\n');
      const route = facts.get(key);
      if (route?.bearer && op.security === undefined) op.security = bearerSecurity;
      for (const media of Object.values(op.requestBody?.content ?? {})) {
        const schema = route?.body ?? media.schema;
        if (!schema) continue;
        media.examples = { ...bodyExamples(schema, parts, media.example), ...media.examples };
        delete media.example;
      }
    }
  };

  /** The body's validator; null for a schema this ajv cannot compile alone (a `$ref` to a shared schema): no page example then. */
  const compiled = (body: JsonSchema): ValidateFunction | null => {
    try {
      return ajv.compile(body);
    } catch (error) {
      app.log.debug({ err: error }, 'request body schema not compiled for the API reference');
      return null;
    }
  };

  const bodyExamples = (body: JsonSchema, parts: { file: string; text: string }[], written: unknown): Record<string, { summary: string; value: unknown }> => {
    const examples: Record<string, { summary: string; value: unknown }> = {};
    // An example written in the route's schema comes first.
    if (written !== undefined) examples.route = { summary: 'From the route schema', value: written };
    const candidates = parts.flatMap((part) => jsonBlocks(part.text).map((value) => ({ file: part.file, value })));
    // Compiled only where the page shows JSON (compiling all 150 bodies would double the document's build time).
    const validate = candidates.length > 0 ? compiled(body) : null;
    const fromDocs = validate && candidates.find(({ value }) => isBodyExample(value, body, validate));
    if (fromDocs) examples.docs = { summary: `From docs/api/${fromDocs.file}`, value: fromDocs.value };
    // Valid by construction for the schemas the routes use; test/http/api-reference.test.ts validates every one.
    examples.schema = { summary: 'Built from the body schema', value: exampleFor(body) };
    return examples;
  };

  // Wrapped once the swagger plugin has decorated the app; the document is built once and cached, so enriched once.
  const build = app.swagger.bind(app) as (options?: { yaml?: boolean }) => unknown;
  app.swagger = ((options?: { yaml?: boolean }) => {
    const doc = build(options);
    if (typeof doc === 'object' && doc !== null && !enriched.has(doc)) {
      enriched.add(doc);
      enrich(doc as OpenApiDocument);
    }
    return doc;
  }) as typeof app.swagger;
}
