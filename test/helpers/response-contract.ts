import { Ajv, type ValidateFunction } from 'ajv';
import { addFormats } from '../../http/plugins/validation.js';

/**
 * The contract check of startTestNode's request(): every answer a test gets is
 * checked against the node's /openapi.json, the document clients and the typed
 * client are built from. The operation must declare the answer's status, and a
 * JSON body must match the schema declared for it; otherwise request() throws,
 * naming the operation and the first mismatch. Routes the document does not
 * list (the console's files, an unknown path's 404) are not checked.
 *
 * Nodes of one configuration serve the same document: one contract per
 * document text, its validators compiled once per test process.
 */
type Doc = { paths: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }> }>>; components?: { schemas?: Record<string, unknown> } };

interface Operation {
  method: string;
  template: string;
  pattern: RegExp;
  statics: number;
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

export class ResponseContract {
  private operations: Operation[] = [];
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly ajv: Ajv;

  constructor(doc: Doc) {
    this.ajv = new Ajv({ strict: false, allErrors: false, validateFormats: true });
    addFormats(this.ajv);
    this.ajv.addSchema({ $id: 'doc', components: doc.components ?? {} });
    for (const [template, methods] of Object.entries(doc.paths)) {
      const pattern = new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`);
      const statics = template.split('/').filter((segment) => segment && !segment.startsWith('{')).length;
      for (const [method, operation] of Object.entries(methods)) {
        this.operations.push({ method: method.toUpperCase(), template, pattern, statics, responses: operation.responses ?? {} });
      }
    }
    // The most specific template first (most literal segments), as the router prefers them.
    this.operations.sort((a, b) => b.statics - a.statics);
  }

  /** The first mismatch of this answer with the document, or undefined. */
  check(method: string, path: string, status: number, contentType: string | null, body: unknown, text: string): string | undefined {
    const bare = path.split('?')[0];
    const verb = method === 'HEAD' ? 'GET' : method;
    const operation = this.operations.find((op) => op.method === verb && op.pattern.test(bare));
    if (!operation) return undefined; // a route not in the document (static files, the console): not checked
    const declared = operation.responses[String(status)] ?? operation.responses[`${String(status)[0]}XX`] ?? operation.responses.default;
    const where = `${verb} ${operation.template} ${status}`;
    if (!declared) return `${where}: the status is not declared (${text.slice(0, 200)})`;
    if (!text || method === 'HEAD') return undefined;
    const content = declared.content?.['application/json'] ?? Object.values(declared.content ?? {})[0];
    if (!content?.schema || !contentType?.includes('json')) return undefined;
    let validate = this.validators.get(where);
    if (validate === undefined) {
      try {
        validate = this.ajv.compile(rewriteRefs(content.schema) as object) as ValidateFunction;
      } catch (error) {
        return `${where}: its schema does not compile (${(error as Error).message})`;
      }
      this.validators.set(where, validate);
    }
    if (!validate(body)) {
      const first = validate.errors?.[0];
      return `${where}: the body does not match its schema at ${first?.instancePath || '/'}: ${first?.message ?? ''} ${JSON.stringify(first?.params ?? {})} (${text.slice(0, 200)})`;
    }
    return undefined;
  }
}

const contracts = new Map<string, ResponseContract>();

/** The contract of a document, by its text: built once per process for every node that serves it. */
export function contractOf(text: string): ResponseContract {
  let contract = contracts.get(text);
  if (!contract) {
    contract = new ResponseContract(JSON.parse(text) as Doc);
    contracts.set(text, contract);
  }
  return contract;
}

/** `#/components/schemas/X` becomes `doc#/components/schemas/X`, the copy of the document's components added to ajv. */
function rewriteRefs(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(rewriteRefs);
  if (typeof schema !== 'object' || schema === null) return schema;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    copy[key] = key === '$ref' && typeof value === 'string' && value.startsWith('#/') ? `doc${value}` : rewriteRefs(value);
  }
  return copy;
}
