import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { findMentions, parseDocBlocks } from '../../http/api-reference/doc-blocks.js';
import { assignDocs, mentionScore } from '../../http/api-reference/operation-docs.js';
import { exampleFor, type JsonSchema } from '../../http/api-reference/request-example.js';

/** The pure parts of the API reference: docs pages to operation text, body schemas to examples. */

describe('endpoint mentions', () => {
  it('reads whole paths, tails, method lists and a heading naming only a method', () => {
    expect(findMentions('`POST /api/v1/mq/queues/orders/purge` → 200', false)).toEqual([{ methods: ['POST'], path: '/api/v1/mq/queues/orders/purge', relative: false }]);
    expect(findMentions('`GET .../bids?limit=&before_seq=`', false)).toEqual([{ methods: ['GET'], path: '/bids', relative: true }]);
    expect(findMentions('### `GET|PUT /admin/rate-limits/tiers/default`', true)).toEqual([{ methods: ['GET', 'PUT'], path: '/admin/rate-limits/tiers/default', relative: false }]);
    expect(findMentions('`POST /definitions` body:', false)).toEqual([{ methods: ['POST'], path: '/definitions', relative: true }]);
    expect(findMentions('## `POST` acquire', true)).toEqual([{ methods: ['POST'], path: null, relative: true }]);
    expect(findMentions('Use POST to extend', false)).toEqual([]);
  });

  it('scores a written path against an operation path', () => {
    const whole = { methods: ['GET'], path: '/api/v1/mq/queues/orders', relative: false };
    expect(mentionScore('/api/v1/mq/queues/{name}', whole)).toBe(104);
    expect(mentionScore('/api/v1/mq/queues/{name}/purge', whole)).toBeNull();
    expect(mentionScore('/api/v1/items/{domain}/definitions', { methods: ['POST'], path: '/definitions', relative: true })).toBe(1);
    expect(mentionScore('/api/v1/items/{domain}/definitions/{id}', { methods: ['POST'], path: '/definitions', relative: true })).toBeNull();
    // A written parameter names only a parameter.
    expect(mentionScore('/api/v1/waiting-rooms/global-bans/{member_id}', { methods: ['GET'], path: '/api/v1/waiting-rooms/{room_id}/bans/{member_id}', relative: false })).toBeNull();
  });
});

describe('assignDocs', () => {
  const page = [
    '# Things',
    '',
    'All things belong to the tenant.',
    '',
    '## `POST` create',
    'Body `{name}`. 409 `thing_exists`.',
    '',
    '## Reading',
    '',
    '`GET /api/v1/things/{id}`: the thing.',
    '```json',
    '{"id": "t1"}',
    '```',
    '',
    '`DELETE /api/v1/things/t1` → 204.',
    '',
    '## Not built',
    'Sharing.',
  ].join('\n');
  const operations = [
    { method: 'post', path: '/api/v1/things', tags: ['things'] },
    { method: 'get', path: '/api/v1/things/{id}', tags: ['things'] },
    { method: 'delete', path: '/api/v1/things/{id}', tags: ['things'] },
  ];
  const docs = assignDocs([{ file: 'things.md', markdown: page }], operations, (tag) => [`${tag}.md`]);

  it('gives each operation the text that names it, up to the next endpoint', () => {
    expect(docs.operations.get('POST /api/v1/things')).toEqual([{ file: 'things.md', text: '## `POST` create\n\nBody `{name}`. 409 `thing_exists`.' }]);
    expect(docs.operations.get('GET /api/v1/things/{id}')![0]!.text).toBe('`GET /api/v1/things/{id}`: the thing.\n\n```json\n{"id": "t1"}\n```');
    expect(docs.operations.get('DELETE /api/v1/things/{id}')![0]!.text).toBe('`DELETE /api/v1/things/t1` → 204.');
  });

  it('leaves the rest to the page, with the headings that still have text under them', () => {
    expect(docs.remainders.get('things.md')).toBe('# Things\n\nAll things belong to the tenant.\n\n## Not built\n\nSharing.');
  });

  it('cuts a page into headings, text, tables and code', () => {
    expect(parseDocBlocks('# T\n\n| a | b |\n|---|---|\n| 1 | 2 |\ntext\n```\ncode\n\nmore\n```').map((block) => block.kind)).toEqual(['heading', 'table', 'text', 'code']);
  });
});

describe('exampleFor', () => {
  it('fills required fields with values their bounds, patterns and formats accept', () => {
    const schema = Type.Object({
      email: Type.String({ format: 'email' }),
      username: Type.String({ pattern: '^[A-Za-z0-9_.-]{3,32}$' }),
      queue: Type.String({ pattern: '^[A-Za-z0-9_-]+(\\.fifo)?$', minLength: 1, maxLength: 80 }),
      code: Type.String({ pattern: '^[A-Z][A-Z0-9_]{0,15}$' }),
      amount: Type.String({ pattern: '^[0-9]{1,10}(\\.[0-9]{1,6})?$' }),
      priority: Type.Union([Type.Literal('high'), Type.Literal('low')]),
      ttl: Type.Integer({ minimum: 30, maximum: 60 }),
      note: Type.Optional(Type.String()),
    }) as unknown as JsonSchema;
    expect(exampleFor(schema)).toEqual({ email: 'user@example.com', username: 'alice', queue: 'example', code: 'EXAMPLE', amount: '10.50', priority: 'high', ttl: 30 });
  });

  it('shows the first fields of an all-optional body, one entry of a map and the non-null side of a union', () => {
    const schema = Type.Object({
      a: Type.Optional(Type.Boolean()),
      b: Type.Optional(Type.Union([Type.Null(), Type.Number({ minimum: 2 })])),
      c: Type.Optional(Type.Record(Type.String(), Type.Integer())),
      d: Type.Optional(Type.String()),
    }) as unknown as JsonSchema;
    expect(exampleFor(schema)).toEqual({ a: false, b: 2, c: { key: 10 } });
  });

  it('uses the schema\'s own example, default and minimum counts first', () => {
    expect(exampleFor({ type: 'string', examples: ['given'] })).toBe('given');
    expect(exampleFor({ type: 'integer', default: 7 })).toBe(7);
    expect(exampleFor({ type: 'array', items: { type: 'string', minLength: 12 }, minItems: 2 }, 'passwords')).toEqual(['correct horse battery staple', 'correct horse battery staple']);
  });
});
