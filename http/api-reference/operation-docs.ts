import { parseDocBlocks, type DocBlock, type EndpointMention } from './doc-blocks.js';

/**
 * Which text of docs/api/*.md belongs to which operation. Each page is cut into blocks; a block
 * that names an endpoint ("## `POST /api/v1/auth/login`", "`GET /api/v1/mq/queues/orders`: ...",
 * "`POST /definitions` body: ...") gives the operation the text that describes it: the whole
 * section under such a heading, or the paragraphs, tables and examples from the naming block to
 * the next block that names another endpoint. What no operation took (the area's model, tenancy,
 * bounds, errors, "not built") stays with the page and becomes its tag's description, so every
 * block of every page reaches the OpenAPI document (test/http/api-reference.test.ts checks it).
 * Pure: pages in, texts out.
 */

export interface DocPage {
  /** The file name under docs/api ("mq.md"). */
  file: string;
  markdown: string;
}

export interface DocOperation {
  method: string;
  /** The OpenAPI path ("/api/v1/mq/queues/{name}"). */
  path: string;
  tags: string[];
}

export interface AssignedDocs {
  /** By operationKey(method, path): the page text about that operation, pages in order. */
  operations: Map<string, { file: string; text: string }[]>;
  /** By page file: the text no operation took (headings kept for what stays under them). */
  remainders: Map<string, string>;
}

export function operationKey(method: string, path: string): string {
  return `${method.toUpperCase()} ${path}`;
}

function segments(path: string): string[] {
  return path.split('/').filter((segment) => segment !== '' && segment !== '...');
}

const isParam = (segment: string) => segment.startsWith('{') && segment.endsWith('}');

/**
 * How well a written path names an operation's path: null when it does not; otherwise the number
 * of literal segments that agree (a written value such as "orders" stands for a parameter), plus
 * 100 for a whole path. A relative mention is compared with the end of the operation's path.
 */
export function mentionScore(operationPath: string, mention: EndpointMention): number | null {
  if (mention.path === null) return null;
  const op = segments(operationPath);
  const written = segments(mention.path);
  if (written.length === 0 || written.length > op.length) return null;
  if (!mention.relative && written.length !== op.length) return null;
  const tail = op.slice(op.length - written.length);
  let literals = 0;
  for (let i = 0; i < written.length; i++) {
    const opSegment = tail[i]!;
    const segment = written[i]!;
    if (isParam(opSegment)) continue;
    if (isParam(segment) || segment !== opSegment) return null;
    literals++;
  }
  if (mention.relative && literals === 0) return null;
  return literals + (mention.relative ? 0 : 100);
}

/** The operations a mention names: the best-scoring ones among those it may name. */
function namedOperations(mention: EndpointMention, candidates: DocOperation[]): DocOperation[] {
  const byMethod = candidates.filter((op) => mention.methods.includes(op.method.toUpperCase()));
  if (mention.path === null) return byMethod.length === 1 ? byMethod : [];
  let best = -1;
  let named: DocOperation[] = [];
  for (const op of byMethod) {
    const score = mentionScore(op.path, mention);
    if (score === null || score < best) continue;
    if (score > best) named = [];
    best = score;
    named.push(op);
  }
  return named;
}

/** The blocks (indices) that describe the endpoint named in blocks[at]. */
function describingBlocks(blocks: DocBlock[], at: number): number[] {
  const block = blocks[at]!;
  const run = [at];
  if (block.kind === 'heading') {
    for (let i = at + 1; i < blocks.length && !(blocks[i]!.kind === 'heading' && blocks[i]!.level <= block.level); i++) run.push(i);
  } else if (block.startsWithMention) {
    for (let i = at + 1; i < blocks.length && blocks[i]!.kind !== 'heading' && !blocks[i]!.startsWithMention; i++) run.push(i);
  }
  return run;
}

/** A table row naming an endpoint: the table's header and that row, not every other row. */
function tableRows(block: DocBlock, mention: EndpointMention): string {
  const lines = block.text.split('\n');
  const rows = lines.slice(2).filter((line) => mention.path !== null && line.includes(mention.path));
  return [...lines.slice(0, 2), ...rows].join('\n');
}

export function assignDocs(pages: DocPage[], operations: DocOperation[], pagesOfTag: (tag: string) => string[]): AssignedDocs {
  const found = new Map<string, { file: string; parts: Map<number, string> }[]>();
  const remainders = new Map<string, string>();
  for (const page of pages) {
    const blocks = parseDocBlocks(page.markdown);
    const used = new Set<number>();
    // A relative mention ("/definitions", "## `POST` acquire") names only operations of the page's own area.
    const ownOperations = operations.filter((op) => op.tags.some((tag) => pagesOfTag(tag).includes(page.file)));
    blocks.forEach((block, at) => {
      for (const mention of block.mentions) {
        const named = namedOperations(mention, mention.relative ? ownOperations : operations);
        if (named.length === 0) continue;
        const parts = new Map<number, string>();
        if (block.kind === 'table') parts.set(at, tableRows(block, mention));
        else for (const i of describingBlocks(blocks, at)) parts.set(i, blocks[i]!.text);
        for (const i of parts.keys()) if (block.kind !== 'table') used.add(i);
        for (const op of named) {
          const key = operationKey(op.method, op.path);
          const list = found.get(key) ?? [];
          let entry = list.find((item) => item.file === page.file);
          if (!entry) list.push((entry = { file: page.file, parts: new Map() }));
          for (const [i, text] of parts) entry.parts.set(i, text);
          found.set(key, list);
        }
      }
    });
    remainders.set(page.file, remainder(blocks, used));
  }
  const assigned = new Map<string, { file: string; text: string }[]>();
  for (const [key, list] of found) {
    assigned.set(key, list.map(({ file, parts }) => ({ file, text: [...parts.entries()].sort(([a], [b]) => a - b).map(([, text]) => text).join('\n\n') })));
  }
  return { operations: assigned, remainders };
}

/** The blocks no operation took, with the headings that still have something under them. */
function remainder(blocks: DocBlock[], used: Set<number>): string {
  const keep = blocks.map((block, i) => block.kind !== 'heading' && !used.has(i));
  for (let i = blocks.length - 1; i >= 0; i--) {
    const block = blocks[i]!;
    if (block.kind !== 'heading' || used.has(i)) continue;
    for (let j = i + 1; j < blocks.length && !(blocks[j]!.kind === 'heading' && blocks[j]!.level <= block.level); j++) {
      if (keep[j]) {
        keep[i] = true;
        break;
      }
    }
  }
  return blocks.filter((_, i) => keep[i]).map((block) => block.text).join('\n\n');
}
