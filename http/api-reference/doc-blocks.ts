/**
 * A docs/api page cut into blocks (a heading, a paragraph or list, a table, a fenced code block),
 * and the endpoints each block names ("`POST /api/v1/mq/queues`", "## `GET` status",
 * "`GET .../bids`"). Pure: the text in, the blocks out (tested in test/unit/api-reference-docs.test.ts).
 */

export type BlockKind = 'heading' | 'text' | 'table' | 'code';

export interface DocBlock {
  kind: BlockKind;
  /** The block's Markdown, as written. */
  text: string;
  /** 1 for "#", 2 for "##", ...; 0 when not a heading. */
  level: number;
  /** The endpoints the block names, in order. */
  mentions: EndpointMention[];
  /** The block starts with an endpoint (the text describing that endpoint begins here). */
  startsWithMention: boolean;
}

export interface EndpointMention {
  methods: string[];
  /** The path as written, query string dropped; null for a heading naming only a method ("## `POST` acquire"). */
  path: string | null;
  /** Written as a tail ("/definitions", ".../bids"): it names the end of a path of the page's area. */
  relative: boolean;
}

const METHOD = '(?:GET|POST|PUT|PATCH|DELETE)';
/** A method or `GET|PUT`, then a path, within one line: "`POST /api/v1/x`", "POST /x", "`DELETE` release". */
const MENTION = new RegExp(`\\b(${METHOD}(?:\\|${METHOD})*)\\b(?:\`)?(?:[ \\t]+(\\.\\.\\.)?(/[^\\s\`),;]*))?`, 'g');
const ABSOLUTE_ROOTS = ['api', 'admin', 'scim', 'oauth', 'x402', '.well-known', 'health', 'cluster', 'metrics', 'openapi.json'];

export function findMentions(text: string, inHeading: boolean): EndpointMention[] {
  const mentions: EndpointMention[] = [];
  for (const match of text.matchAll(MENTION)) {
    const methods = match[1]!.split('|');
    const written = match[3];
    if (!written) {
      // A bare method names an endpoint only as a heading of its own ("## `POST` acquire").
      if (inHeading && match.index === text.indexOf('`') + 1) mentions.push({ methods, path: null, relative: true });
      continue;
    }
    const path = written.split('?')[0]!.replace(/[.:]+$/, '');
    if (path === '/' || path.length < 2) continue;
    const root = path.split('/')[1] ?? '';
    mentions.push({ methods, path, relative: match[2] !== undefined || !ABSOLUTE_ROOTS.includes(root) });
  }
  return mentions;
}

/** Whether the block's first words are an endpoint: "`GET /x`: ...", "- `POST /y` ...", "### `PUT /z`". */
function startsWithEndpoint(text: string): boolean {
  return new RegExp(`^(?:#+\\s*|[-*]\\s+|\\*\\*)?\`?${METHOD}\\b`).test(text.trimStart());
}

export function parseDocBlocks(markdown: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  const lines = markdown.split('\n');
  let i = 0;
  const push = (kind: BlockKind, text: string, level = 0) => {
    const mentions = findMentions(kind === 'code' ? text.split('\n')[1] ?? '' : text, kind === 'heading');
    blocks.push({ kind, text, level, mentions, startsWithMention: mentions.length > 0 && (kind === 'code' ? true : startsWithEndpoint(text)) });
  };
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.trim() === '') {
      i++;
      continue;
    }
    if (/^```/.test(line.trim())) {
      const start = i++;
      while (i < lines.length && !/^```/.test(lines[i]!.trim())) i++;
      push('code', lines.slice(start, Math.min(i + 1, lines.length)).join('\n'));
      i++;
      continue;
    }
    const heading = /^(#{1,6})\s/.exec(line);
    if (heading) {
      push('heading', line, heading[1]!.length);
      i++;
      continue;
    }
    const start = i;
    const table = line.trimStart().startsWith('|');
    while (i < lines.length && lines[i]!.trim() !== '' && !/^#{1,6}\s/.test(lines[i]!) && !/^```/.test(lines[i]!.trim())) {
      if (lines[i]!.trimStart().startsWith('|') !== table) break;
      i++;
    }
    push(table ? 'table' : 'text', lines.slice(start, i).join('\n'));
  }
  return blocks;
}
