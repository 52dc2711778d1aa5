import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DocPage } from './operation-docs.js';

/**
 * docs/api, found from this file: http/api-reference under the test runner, dist/http/api-reference
 * when built (`npm start` runs from dist inside the checkout). Null when the pages are not there
 * (a dist copied without the repository): the document then has no page text, and says so.
 */
export function docsApiDir(): string | null {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let up = 0; up < 5; up++) {
    const candidate = join(dir, 'docs', 'api');
    if (existsSync(join(candidate, 'README.md'))) return candidate;
    dir = dirname(dir);
  }
  return null;
}

/** Every page of docs/api but its index (README.md), by file name. */
export function readDocPages(dir: string): DocPage[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.md') && file !== 'README.md')
    .sort()
    .map((file) => ({ file, markdown: withoutRelativeLinks(readFileSync(join(dir, file), 'utf8')) }));
}

/**
 * A link to another page of the repository ("[errors](../errors.md)") would point under /docs in
 * the rendered reference, where nothing is: its text stays, the link goes. Web links stay.
 */
export function withoutRelativeLinks(markdown: string): string {
  return markdown.replace(/\[([^\]]+)\]\((?![a-z]+:)[^)\s]+\)/g, '$1');
}

/** The page holding the conventions of every endpoint: the document's own description. */
export const COMMON_PAGE = 'common.md';

/** The pages of an OpenAPI tag: `<tag>.md`, except the tags that span several pages. */
const PAGES_OF_TAG: Record<string, string[]> = {
  auth: ['accounts.md', 'two-factor.md', 'api-keys.md', 'email-verification.md', 'cli-login.md', 'linked-accounts.md'],
  health: [],
};

export function pagesOfTag(tag: string): string[] {
  return PAGES_OF_TAG[tag] ?? [`${tag}.md`];
}
