import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** Regression (identity hardening): a SCIM filter naming an inherited property is a 400 invalidFilter, not a 500. */
let t: TestNode;
let scimToken: string;

beforeAll(async () => {
  t = await startTestNode();
  const owner = await t.newUser('scimnames');
  const org = await t.request('POST', '/api/v1/orgs', { token: owner.token, body: { name: 'Names' } });
  scimToken = (await t.request('POST', `/api/v1/orgs/${org.body.org_id}/scim-tokens`, { token: owner.token, body: {} })).body.token;
});

afterAll(async () => {
  await t?.destroy();
});

it.each(['__proto__ eq "x"', 'constructor pr', 'toString eq "x"', 'valueOf pr'])('filter=%s answers 400 invalidFilter', async (filter) => {
  const res = await t.request('GET', `/scim/v2/Users?filter=${encodeURIComponent(filter)}`, { token: scimToken });
  expect(res.status).toBe(400);
  expect(res.body).toMatchObject({ schemas: ['urn:ietf:params:scim:api:messages:2.0:Error'], status: '400', scimType: 'invalidFilter' });
});
