import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { isExemptPath } from '../../actors/x402/messages.js';
import { isBearerAuthentication } from '../plugins/authenticate.js';
import { addFormats } from '../plugins/validation.js';
import { isProbeRoute } from '../rate-limits/resolve.js';
import { bearerSecurity } from '../schemas.js';
import { COMMON_PAGE, docsApiDir, pagesOfTag, readDocPages } from './doc-pages.js';
import { assignDocs, operationKey, type DocOperation } from './operation-docs.js';
import { exampleFor, type JsonSchema } from './request-example.js';

/** The validator the node applies to bodies (http/plugins/validation.ts), without defaults filled in. */
function bodyValidator(): Ajv {
  const ajv = new Ajv({ allErrors: false, useDefaults: false, removeAdditional: false, strict: false, coerceTypes: false });
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
  /** The rate limiter counts its requests (all but probes and scrapes). */
  counted: boolean;
  /** An x402 price rule may cover it (outside the exempt paths). */
  priceable: boolean;
}

/** Which refusals of the edge's own this node gives: rate limits (429) and x402 (402) can be off. */
export interface EdgeRefusals {
  rateLimits: boolean;
  x402: boolean;
}

type OpenApiResponse = { description: string; content?: Record<string, { schema?: unknown }> };

interface OpenApiOperation {
  tags?: string[];
  responses?: Record<string, OpenApiResponse>;
  description?: string;
  security?: unknown[];
  requestBody?: { content?: Record<string, { schema?: JsonSchema; example?: unknown; examples?: Record<string, { summary?: string; value: unknown }> }> };
}

interface OpenApiDocument {
  info: { description?: string };
  components?: { schemas?: Record<string, { title?: string }> };
  tags?: { name: string; description?: string }[];
  paths: Record<string, Record<string, OpenApiOperation>>;
}

/** A route's URL as @fastify/swagger writes it: `:id` becomes `{id}`, a wildcard `{*}`. */
function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*/g, '{*}');
}

/** The document's reference to ErrorBody (app.ts adds it as a shared schema; @fastify/swagger names it `def-N`). */
function errorBodyRef(doc: OpenApiDocument): unknown {
  const name = Object.entries(doc.components?.schemas ?? {}).find(([, schema]) => schema.title === 'Error')?.[0];
  return name === undefined ? { type: 'object' } : { $ref: `#/components/schemas/${name}` };
}

/** The x402 refusal's body (http/x402-protocol.ts, paymentRequiredBody): not ErrorBody. */
const PAYMENT_REQUIRED_BODY = {
  type: 'object',
  required: ['x402Version', 'error', 'accepts'],
  properties: { x402Version: { type: 'integer' }, error: { type: 'string' }, accepts: { type: 'array', items: { type: 'object' } } },
};

/**
 * The answers the edge gives before a route's handler runs, on every route they apply to, where
 * the route's schema does not list them: 403 on bearer routes (an API key or OAuth token without
 * the scope, or a route that takes no API key), 429 where the rate limiter counts, and 402 where an
 * x402 price rule may apply (with X402_ENABLED). A client built from the document then knows them.
 */
function addEdgeRefusals(op: OpenApiOperation, route: RouteFacts, edge: EdgeRefusals, errorBody: unknown): void {
  const responses = (op.responses ??= {});
  const json = (schema: unknown) => ({ 'application/json': { schema } });
  if (route.bearer) responses['403'] ??= { description: 'Forbidden: the credential lacks the scope this operation needs (insufficient_scope), or may not act on the resource.', content: json(errorBody) };
  if (edge.rateLimits && route.counted) responses['429'] ??= { description: 'Too many requests (rate_limited); Retry-After and the RateLimit headers say when to retry.', content: json(errorBody) };
  if (edge.x402 && route.priceable) responses['402'] ??= { description: 'Payment required (x402): a price rule covers this request; the body lists the accepted payments (docs/api/x402.md).', content: json(PAYMENT_REQUIRED_BODY) };
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
 *   and one built from the body schema (request-example.ts);
 * - the edge's own refusals where the route's schema does not list them (addEdgeRefusals).
 * `app.swagger()` is wrapped: every reader of the JSON document (/openapi.json, /docs/json) gets
 * it enriched, whatever transforms the swagger registration has (the YAML form, /docs/yaml, is
 * not). Registered before the routes: the onRoute hook sees only the routes added after it.
 */
export function registerOpenApiEnrichment(app: FastifyInstance, edge: EdgeRefusals = { rateLimits: true, x402: false }): void {
  const facts = new Map<string, RouteFacts>();
  const enriched = new WeakSet<object>();
  const ajv = bodyValidator();

  app.addHook('onRoute', (route) => {
    const schema = (route.schema ?? {}) as Record<string, unknown>;
    const bearer = onRequestHooks(route).some(isBearerAuthentication);
    const body = typeof schema.body === 'object' && schema.body !== null ? (schema.body as JsonSchema) : undefined;
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      facts.set(operationKey(method, openApiPath(route.url)), { bearer, body, counted: !isProbeRoute(route.url), priceable: !isExemptPath(route.url) });
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

    const errorBody = errorBodyRef(doc);
    for (const { method, path, tags: opTags, op } of operations) {
      const key = operationKey(method, path);
      const parts = docs.operations.get(key) ?? [];
      const area = opTags[0] ? ` The area's model, rules and decisions: the **${opTags[0]}** section's description.` : '';
      const footer = parts.length > 0 ? `*From docs/api/${[...new Set(parts.map((part) => part.file))].join(', docs/api/')}.${area}*` : `*No section of docs/api names this operation.${area}*`;
      op.description = [op.description, ...parts.map((part) => part.text), footer].filter(Boolean).join('\n\n');
      const route = facts.get(key);
      if (route?.bearer && op.security === undefined) op.security = bearerSecurity;
      if (route) addEdgeRefusals(op, route, edge, errorBody);
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
