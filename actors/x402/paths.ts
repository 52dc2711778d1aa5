/**
 * Route path templates as price rules name them (`/api/v1/things/:id`) and
 * how a template or a concrete path matches one. Pure: the pricing actor
 * and the edge share it.
 */

/** A template: `/`-separated segments, each static text, `:name` (one segment) or a final `*` (the rest). */
export const PATH_TEMPLATE_PATTERN = '^(/([A-Za-z0-9._~!$&\'()+,;=@%-]+|:[A-Za-z_][A-Za-z0-9_]*|\\*))+/?$|^/$';
const TEMPLATE_SYNTAX = new RegExp(PATH_TEMPLATE_PATTERN);
export const PATH_LENGTH_MAX = 512;

type Segment = { kind: 'static'; text: string } | { kind: 'param' } | { kind: 'wildcard' };

function segmentsOf(path: string): Segment[] {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  if (trimmed === '/') return [];
  return trimmed
    .slice(1)
    .split('/')
    .map((part): Segment => (part === '*' ? { kind: 'wildcard' } : part.startsWith(':') ? { kind: 'param' } : { kind: 'static', text: part }));
}

/** Whether `path` is a template this area accepts (a `*` only as the last segment). */
export function isPathTemplate(path: string): boolean {
  if (path.length > PATH_LENGTH_MAX || !TEMPLATE_SYNTAX.test(path)) return false;
  const segments = segmentsOf(path);
  return segments.every((segment, index) => segment.kind !== 'wildcard' || index === segments.length - 1);
}

/**
 * The template with its parameter names erased (`/a/:id` and `/a/:name` are
 * the same route to Fastify's router, so they are the same rule), no trailing slash.
 */
export function normalizeTemplate(path: string): string {
  const segments = segmentsOf(path);
  if (segments.length === 0) return '/';
  return segments.map((segment) => '/' + (segment.kind === 'static' ? segment.text : segment.kind === 'param' ? ':' : '*')).join('');
}

/**
 * Whether the rule's template covers `path`, a template or a concrete path.
 * A rule's `:param` covers any one segment (static or a parameter of the
 * path); a static segment covers only the same text; a final `*` covers the rest.
 */
export function templateMatches(rule: string, path: string): boolean {
  return segmentsMatch(segmentsOf(rule), segmentsOf(path));
}

/** A rule's segments against a path's: a `:param` covers one segment but a wildcard, static text only itself, a final `*` the rest. */
function segmentsMatch(ruleSegments: readonly Segment[], pathSegments: readonly Segment[]): boolean {
  for (let index = 0; index < ruleSegments.length; index++) {
    const segment = ruleSegments[index];
    if (segment.kind === 'wildcard') return true;
    const other = pathSegments[index];
    if (other === undefined) return false;
    if (segment.kind === 'param') {
      if (other.kind === 'wildcard') return false;
      continue;
    }
    if (other.kind !== 'static' || other.text !== segment.text) return false;
  }
  return ruleSegments.length === pathSegments.length;
}

/**
 * A request's path as the router saw it, one entry per segment, every one
 * plain text: the route's template with each `:param` replaced by the value
 * the router decoded for it (and a final `*` by the rest it matched). So
 * `/a/%6cock` prices as `/a/lock`, the route it reaches, and a segment that
 * reads `*` or `:x` is text, not a pattern.
 */
export function routedSegments(template: string, params: Readonly<Record<string, unknown>>): string[] {
  const segments: string[] = [];
  const trimmed = template.length > 1 && template.endsWith('/') ? template.slice(0, -1) : template;
  if (trimmed === '/') return segments;
  for (const part of trimmed.slice(1).split('/')) {
    if (part === '*') segments.push(...String(params['*'] ?? '').split('/'));
    else if (part.startsWith(':')) segments.push(String(params[part.slice(1)] ?? ''));
    else segments.push(part);
  }
  return segments;
}

/**
 * A concrete path given as text (a quote's `path`), one entry per segment,
 * each percent-decoded as the router decodes it (left as it is when it does
 * not decode); every one plain text, as routedSegments.
 */
export function concreteSegments(path: string): string[] {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  if (trimmed === '/' || trimmed === '') return [];
  return trimmed
    .slice(1)
    .split('/')
    .map((part) => {
      try {
        return decodeURIComponent(part);
      } catch {
        return part;
      }
    });
}

/** templateMatches for a concrete path's segments (routedSegments, concreteSegments): each is text, matched as text. */
export function templateMatchesSegments(rule: string, path: readonly string[]): boolean {
  return segmentsMatch(segmentsOf(rule), path.map((text): Segment => ({ kind: 'static', text })));
}

/** serviceOf for a concrete path's segments. */
export function serviceOfSegments(path: readonly string[]): string {
  return serviceSegment(path).toLowerCase();
}

/**
 * Orders two templates that both match a path: negative when `a` is more
 * specific. As Fastify's router prefers, segment by segment from the left,
 * static text beats a parameter, which beats a wildcard.
 */
export function compareSpecificity(a: string, b: string): number {
  const rank = (segment: Segment | undefined) => (segment === undefined ? 3 : segment.kind === 'static' ? 0 : segment.kind === 'param' ? 1 : 2);
  const left = segmentsOf(a);
  const right = segmentsOf(b);
  for (let index = 0; index < Math.max(left.length, right.length); index++) {
    const difference = rank(left[index]) - rank(right[index]);
    if (difference !== 0) return difference;
  }
  return 0;
}

/**
 * The service a path belongs to: its first segment, after the `/api/v<N>`
 * version prefix when there is one (`/api/v1/distributed-state/...` ->
 * `distributed-state`, `/x402/catalog` -> `x402`); '' for `/`.
 */
export function serviceOf(path: string): string {
  const first = serviceSegment(path.split('/').filter((part) => part !== ''));
  return first.startsWith(':') || first === '*' ? '' : first.toLowerCase();
}

/** The first segment after the `/api/v<N>` version prefix when there is one ('' when none). */
function serviceSegment(parts: readonly string[]): string {
  const start = parts[0] === 'api' && parts[1] !== undefined && /^v[0-9]+$/.test(parts[1]) ? 2 : 0;
  return parts[start] ?? '';
}
