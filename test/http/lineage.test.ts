import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode, type TestResponse } from '../helpers/node.js';

/** Lineage over the real socket (spec doc 2 §2 Lineage, §4.3; docs/api/lineage.md). */
let t: TestNode;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
let bob: Awaited<ReturnType<TestNode['newUser']>>;
let adminToken: string;
const ADMIN = { email: 'root@example.com', password: 'admin password 1' };
const base = '/api/v1/lineage';

beforeAll(async () => {
  t = await startTestNode({ config: { accessTokenTtlSeconds: 86_400, adminEmail: ADMIN.email, adminPassword: ADMIN.password } });
  alice = await t.newUser('alice');
  bob = await t.newUser('bob');
  const login = await t.request('POST', '/api/v1/auth/login', { body: { login: ADMIN.email, password: ADMIN.password } });
  adminToken = login.body.access_token;
});
afterAll(async () => {
  await t?.destroy();
});

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code, error: expect.any(String), message: expect.any(String) });
}

const post = (path: string, body: unknown, token = alice.token) => t.request('POST', `${base}${path}`, { token, body });
const get = (path: string, token = alice.token) => t.request('GET', `${base}${path}`, { token });
const put = (path: string, body: unknown, token = alice.token) => t.request('PUT', `${base}${path}`, { token, body });
const del = (path: string, token = alice.token) => t.request('DELETE', `${base}${path}`, { token });

const COAT = {
  trait_id: 'coat',
  kind: 'mendelian',
  name: 'Coat colour',
  alleles: [
    { id: 'B', label: 'black', dominance: 2 },
    { id: 'b', label: 'brown', dominance: 1, carrier_only_visible: true },
  ],
};
const SPEED = { trait_id: 'speed', kind: 'numeric', name: 'Speed', range: { min: 0, max: 100, decimals: 1 }, inheritance: { variance: { distribution: 'normal', stddev: 2 } } };
const GLOW = { trait_id: 'glow', kind: 'mendelian', name: 'Glow', hidden: true, expression: 'codominant', alleles: [{ id: 'g1' }, { id: 'g2' }] };

/** Sets up a tenant's traits and a species; returns the species. */
async function horseFor(token: string, species_id = 'horse', extra: Record<string, unknown> = {}) {
  for (const trait of [COAT, SPEED, GLOW]) {
    const res = await post('/traits', trait, token);
    expect([201, 409]).toContain(res.status);
  }
  const res = await post('/species', { species_id, name: 'Horse', parent_count: { min: 2, max: 2 }, traits: ['coat', 'speed', 'glow'], ...extra }, token);
  expect(res.status, res.text).toBe(201);
  return res.body;
}

async function founder(entity_id: string, token = alice.token, extra: Record<string, unknown> = {}) {
  const res = await post('/genomes', { entity_id, species_id: 'horse', ...extra }, token);
  expect(res.status, res.text).toBe(201);
  return res.body;
}

describe('traits', () => {
  it('create, read, list, replace and delete; every bad input is a 4xx with the error shape', async () => {
    const created = await post('/traits', { trait_id: 'eyes', kind: 'mendelian', name: 'Eyes', alleles: [{ id: 'E', dominance: 1 }, { id: 'e' }], mutation: { rate: 0.01, offset_min: -1, offset_max: 1 } });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toEqual({
      trait_id: 'eyes',
      name: 'Eyes',
      kind: 'mendelian',
      expression: 'highest_dominance',
      alleles: [{ id: 'E', label: 'E', dominance: 1, carrier_only_visible: false }, { id: 'e', label: 'e', dominance: 0, carrier_only_visible: false }],
      hidden: false,
      conflicts_with: [],
      inheritance: { parent_weighting: 'equal', variance: { distribution: 'none', stddev: 0 } },
      mutation: { rate: 0.01, offset_min: -1, offset_max: 1 },
      range: null,
      created_at: expect.any(String),
      created_by: alice.user_id,
      updated_at: expect.any(String),
    });
    expect((await get('/traits/eyes')).body.name).toBe('Eyes');
    expectError(await post('/traits', { trait_id: 'eyes', kind: 'mendelian', name: 'Again', alleles: [{ id: 'x' }] }), 409, 'conflict');
    expectError(await post('/traits', { kind: 'numeric', name: 'No range' }), 400, 'BAD_REQUEST');
    expectError(await post('/traits', { kind: 'numeric', name: 'Bad range', range: { min: 5, max: 5 } }), 400, 'BAD_REQUEST');
    expectError(await post('/traits', { kind: 'mendelian', name: 'No alleles' }), 400, 'BAD_REQUEST');
    expectError(await post('/traits', { kind: 'mendelian', name: 'Twice', alleles: [{ id: 'a' }, { id: 'a' }] }), 400, 'BAD_REQUEST');
    expectError(await post('/traits', { kind: 'mendelian', name: 'Conflicts', alleles: [{ id: 'a' }], conflicts_with: ['nope'] }), 400, 'BAD_REQUEST');
    expectError(await post('/traits', { kind: 'gaussian', name: 'Kind' }), 400, 'BAD_REQUEST');
    expectError(await post('/traits', { kind: 'mendelian' }), 400, 'BAD_REQUEST');
    expectError(await get('/traits/nope'), 404, 'not_found');

    const replaced = await put('/traits/eyes', { kind: 'mendelian', name: 'Eye colour', alleles: [{ id: 'E', dominance: 1 }, { id: 'e' }, { id: 'r' }] });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.body.alleles).toHaveLength(3);
    expectError(await put('/traits/nope', { kind: 'mendelian', name: 'x', alleles: [{ id: 'a' }] }), 404, 'not_found');

    const list = await get('/traits?page=1&page_size=1&sort_by=name&sort_order=desc');
    expect(list.status).toBe(200);
    expect(list.body.pagination).toMatchObject({ page: 1, page_size: 1 });
    expect(list.body.traits).toHaveLength(1);

    expect((await del('/traits/eyes')).body).toEqual({ message: 'Trait deleted', trait_id: 'eyes' });
    expectError(await get('/traits/eyes'), 404, 'not_found');
    expectError(await del('/traits/eyes'), 404, 'not_found');
  });

  it('a trait in use cannot be deleted nor change its kind; replacing it makes a new species version', async () => {
    await horseFor(alice.token, 'pony');
    expectError(await del('/traits/coat'), 409, 'trait_in_use');
    expectError(await put('/traits/coat', { kind: 'numeric', name: 'Coat', range: { min: 0, max: 1 } }), 409, 'trait_in_use');
    expectError(await put('/traits/coat', { kind: 'mendelian', name: 'Coat', alleles: [{ id: 'B' }] }), 409, 'trait_in_use');
    const before = (await get('/species/pony')).body.version;
    expect((await put('/traits/coat', { ...COAT, trait_id: undefined, name: 'Coat (renamed)' })).status).toBe(200);
    expect((await get('/species/pony')).body.version).toBe(before + 1);
  });
});

describe('species', () => {
  it('create, read, list, update (version bumps), delete', async () => {
    await horseFor(alice.token, 'mule');
    const created = await get('/species/mule');
    expect(created.body).toMatchObject({
      species_id: 'mule',
      name: 'Horse',
      version: 1,
      parent_count: { min: 2, max: 2 },
      compatibility: { min_generation: 0, required_flags: [], self_compatible: false },
      lineage: { inbreeding: { compute: true, max_coefficient: 1, penalties_enabled: false }, track_generations: true },
      max_lifetime_breedings: 0,
      preview_quantization: { bands: 4 },
      traits: ['coat', 'speed', 'glow'],
      created_by: alice.user_id,
    });
    const updated = await put('/species/mule', { name: 'Mule', lineage: { inbreeding: { max_coefficient: 0.1 } } });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.body).toMatchObject({ name: 'Mule', version: 2, lineage: { inbreeding: { compute: true, max_coefficient: 0.1 } } });
    expect((await put('/species/mule', {})).body.version).toBe(3);
    const list = await get('/species?sort_by=name');
    expect(list.body.species.map((s: { species_id: string }) => s.species_id)).toContain('mule');
    expect((await del('/species/mule')).body).toEqual({ message: 'Species deleted', species_id: 'mule' });
    expectError(await get('/species/mule'), 404, 'not_found');
    expectError(await put('/species/mule', { name: 'x' }), 404, 'not_found');
    expectError(await post('/species', { species_id: 'mule', name: 'Again', parent_count: { min: 2, max: 2 } }), 409, 'conflict');
  });

  it('refuses unknown traits, conflicting traits and impossible parent counts with 400, creating nothing', async () => {
    expectError(await post('/species', { species_id: 's1', name: 'S', parent_count: { min: 2, max: 2 }, traits: ['nope'] }), 400, 'BAD_REQUEST');
    expectError(await post('/species', { species_id: 's1', name: 'S', parent_count: { min: 2, max: 1 } }), 400, 'BAD_REQUEST');
    expectError(await post('/species', { species_id: 's1', name: 'S', parent_count: { min: 2, max: 3 } }), 400, 'BAD_REQUEST');
    expect((await post('/traits', { trait_id: 'fire', kind: 'mendelian', name: 'Fire', alleles: [{ id: 'f' }] })).status).toBe(201);
    expect((await post('/traits', { trait_id: 'ice', kind: 'mendelian', name: 'Ice', alleles: [{ id: 'i' }], conflicts_with: ['fire'] })).status).toBe(201);
    expectError(await post('/species', { species_id: 's1', name: 'S', parent_count: { min: 2, max: 2 }, traits: ['fire', 'ice'] }), 400, 'BAD_REQUEST');
    expectError(await get('/species/s1'), 404, 'not_found');
  });

  it('another tenant sees nothing', async () => {
    await horseFor(alice.token, 'secretive');
    expectError(await get('/species/secretive', bob.token), 404, 'not_found');
    expect((await get('/species', bob.token)).body.species).toEqual([]);
  });
});

describe('genomes, breeding, pedigree, provenance, preview, records', () => {
  it('founders, a breed with its seed, replay, and every view', async () => {
    await horseFor(alice.token);
    const mare = await founder('mare', alice.token, { alleles: { coat: { first: 'B', second: 'b' } }, numeric: { speed: 40 }, flags: ['champion'] });
    expect(mare).toMatchObject({ entity_id: 'mare', species_id: 'horse', species_version: 1, owner: alice.user_id, generation: 0, breeding_count: 0, expressed: { coat: 'B' }, numeric: { speed: 40 }, raw_alleles: {}, full: false });
    expect(mare.expressed).not.toHaveProperty('glow');
    expect(mare.flags).toEqual(['carrier:coat:b', 'champion']);
    await founder('stallion', alice.token, { seed: 'fixed' });
    expectError(await post('/genomes', { entity_id: 'mare', species_id: 'horse' }), 409, 'conflict');
    expectError(await post('/genomes', { entity_id: 'x', species_id: 'nope' }), 404, 'not_found');
    expectError(await post('/genomes', { entity_id: 'x', species_id: 'horse', alleles: { coat: { first: 'B', second: 'Q' } } }), 400, 'BAD_REQUEST');
    expectError(await post('/genomes', { entity_id: 'x', species_id: 'horse', numeric: { nope: 1 } }), 400, 'BAD_REQUEST');
    expectError(await get('/entities/x/genome'), 404, 'not_found');

    const bred = await post('/breed', { parents: ['mare', 'stallion'], species_id: 'horse', seed: 'foal-seed', offspring_entity_id: 'foal' });
    expect(bred.status, bred.text).toBe(201);
    expect(bred.body).toEqual({
      record_id: expect.any(String),
      species_id: 'horse',
      species_version: 1,
      parents: ['mare', 'stallion'],
      offspring: [{ anchor_artifact_id: expect.stringMatching(/^anc_/), anchor_hash: expect.stringMatching(/^[0-9a-f]{64}$/), entity_id: 'foal', generation: 1, inbreeding_coefficient: 0 }],
      mutations: [],
      requested_by: alice.user_id,
      seed: 'foal-seed',
      created_at: expect.any(String),
    });
    const again = await post('/breed', { parents: ['mare', 'stallion'], species_id: 'horse', seed: 'foal-seed', offspring_entity_id: 'twin' });
    expect(again.status).toBe(201);
    const foal = (await get('/entities/foal/genome')).body;
    const twin = (await get('/entities/twin/genome')).body;
    expect(twin.expressed).toEqual(foal.expressed);
    expect(twin.numeric).toEqual(foal.numeric);
    expect((await get('/entities/mare/genome')).body.breeding_count).toBe(2);
    // A random seed when none is given, recorded on the record.
    const random = await post('/breed', { parents: ['mare', 'stallion'], species_id: 'horse' });
    expect(random.body.seed).toMatch(/^seed_/);

    // full=true and another tenant's genome: platform admins only.
    expectError(await get('/entities/foal/genome?full=true'), 403, 'forbidden');
    expectError(await get(`/entities/foal/genome?tenant=${alice.user_id}`, bob.token), 403, 'forbidden');
    const audited = await get(`/entities/foal/genome?full=true&tenant=${alice.user_id}`, adminToken);
    expect(audited.status, audited.text).toBe(200);
    expect(audited.body).toMatchObject({ entity_id: 'foal', full: true, raw_alleles: { coat: expect.any(Object), glow: expect.any(Object) } });
    expect(audited.body.expressed).toHaveProperty('glow');

    const pedigree = await get('/entities/foal/pedigree?depth=5');
    expect(pedigree.body).toEqual({
      entity_id: 'foal',
      generation: 1,
      inbreeding_coefficient: 0,
      depth: 5,
      ancestors: [{ distance: 1, entity_id: 'mare', generation: 0 }, { distance: 1, entity_id: 'stallion', generation: 0 }],
    });
    expect((await get('/entities/foal/pedigree?depth=0')).body.ancestors).toEqual([]);
    expectError(await get('/entities/foal/pedigree?depth=-1'), 400, 'BAD_REQUEST');

    // Full siblings bred together: F 0.25, in the pedigree and the record.
    const inbred = await post('/breed', { parents: ['foal', 'twin'], species_id: 'horse', seed: 's', offspring_entity_id: 'inbred' });
    expect(inbred.body.offspring[0]).toMatchObject({ generation: 2, inbreeding_coefficient: 0.25 });
    const deep = (await get('/entities/inbred/pedigree?depth=99')).body;
    expect(deep.depth).toBe(10);
    expect(deep.ancestors.map((a: { entity_id: string; distance: number }) => `${a.entity_id}@${a.distance}`)).toEqual(['foal@1', 'twin@1', 'mare@2', 'stallion@2']);

    const provenance = await get('/entities/inbred/provenance');
    expect(provenance.status, provenance.text).toBe(200);
    expect(provenance.body).toMatchObject({
      entity_id: 'inbred',
      species_id: 'horse',
      species_version: 1,
      generation: 2,
      owner: alice.user_id,
      parents: ['foal', 'twin'],
      record_id: inbred.body.record_id,
      seed: 's',
      anchor_hash: inbred.body.offspring[0].anchor_hash,
      anchor_artifact_id: inbred.body.offspring[0].anchor_artifact_id,
      chain_verified: true,
      genomes_verified: 5,
      failures: [],
    });
    expect((await get('/entities/mare/provenance')).body).toMatchObject({ chain_verified: true, record_id: null, parents: [] });
    expectError(await get('/entities/ghost/provenance'), 404, 'not_found');

    const preview = await post('/preview', { parents: ['foal', 'twin'], species_id: 'horse' });
    expect(preview.status, preview.text).toBe(200);
    expect(preview.body).toMatchObject({ species_id: 'horse', species_version: 1, exact: false, inbreeding_coefficient: 0.25, mutation_hint: 'none' });
    expect(preview.body.traits.map((trait: { trait_id: string }) => trait.trait_id)).toEqual(['coat', 'speed']);
    for (const trait of preview.body.traits) expect(trait.exact).toEqual({});
    expect(preview.body.traits[0].band).toMatch(/^B(\+b)? \d+-\d+%$|^b \d+-\d+%$/);
    expect(preview.body.traits[1].band).toMatch(/^\d+(\.\d)?\.\.\d+(\.\d)?$/);
    expectError(await post('/preview', { parents: ['foal', 'twin'], species_id: 'horse', exact: true }), 403, 'forbidden');
    expectError(await post('/preview', { parents: ['foal'], species_id: 'horse' }), 400, 'BAD_REQUEST');
    expectError(await post('/preview', { parents: ['foal', 'ghost'], species_id: 'horse' }), 404, 'not_found');
    expectError(await post('/preview', { parents: ['foal', 'twin'], species_id: 'nope' }), 404, 'not_found');

    const records = await get('/records?parent=foal');
    expect(records.status).toBe(200);
    expect(records.body.pagination).toMatchObject({ total: 1 });
    expect(records.body.records[0]).not.toHaveProperty('seed');
    expect(records.body.records[0].record_id).toBe(inbred.body.record_id);
    expect((await get('/records?species_id=horse&sort_order=asc')).body.records[0].parents).toEqual(['mare', 'stallion']);
    expect((await get(`/records?requested_by=${alice.user_id}&page_size=2`)).body.pagination).toMatchObject({ total: 4, page_size: 2, has_more: true });
    expect((await get('/records?species_id=none')).body.records).toEqual([]);
    expect((await get('/records', bob.token)).body.records).toEqual([]);
    expectError(await get('/entities/foal/genome', bob.token), 404, 'not_found');
  });

  it('bad breedings are refused with nothing changed', async () => {
    await horseFor(alice.token, 'donkey', { max_lifetime_breedings: 1, lineage: { inbreeding: { max_coefficient: 0.2 } } });
    for (const id of ['d1', 'd2', 'd3', 'd4']) {
      expect((await post('/genomes', { entity_id: id, species_id: 'donkey' })).status).toBe(201);
    }
    expectError(await post('/breed', { parents: ['d1'], species_id: 'donkey' }), 400, 'BAD_REQUEST');
    expectError(await post('/breed', { parents: ['d1', 'd2', 'd3'], species_id: 'donkey' }), 400, 'BAD_REQUEST');
    expectError(await post('/breed', { parents: [], species_id: 'donkey' }), 400, 'BAD_REQUEST');
    expectError(await post('/breed', { parents: ['d1', 'd2'], species_id: 'nope' }), 404, 'not_found');
    expectError(await post('/breed', { parents: ['d1', 'ghost'], species_id: 'donkey' }), 404, 'not_found');
    expectError(await post('/breed', { parents: ['d1', 'd1'], species_id: 'donkey' }), 409, 'breeding_incompatible');
    expectError(await post('/breed', { parents: ['d1', 'mare'], species_id: 'donkey' }), 409, 'breeding_incompatible');
    expectError(await post('/breed', { parents: ['d1', 'd2'], species_id: 'donkey', offspring_entity_id: 'd3' }), 409, 'conflict');
    for (const id of ['d1', 'd2']) expect((await get(`/entities/${id}/genome`)).body.breeding_count).toBe(0);
    expect((await post('/breed', { parents: ['d1', 'd2'], species_id: 'donkey', offspring_entity_id: 'k1' })).status).toBe(201);
    const capped = await post('/breed', { parents: ['d1', 'd3'], species_id: 'donkey' });
    expectError(capped, 409, 'breeding_limit_reached');
    expect(capped.body.details).toMatchObject({ entity_id: 'd1', breeding_count: 1, max_lifetime_breedings: 1 });
    expect((await get('/entities/d3/genome')).body.breeding_count).toBe(0);
    // Raise the cap; siblings are still too related for max_coefficient 0.2.
    expect((await put('/species/donkey', { max_lifetime_breedings: 0 })).body.version).toBe(2);
    expect((await post('/breed', { parents: ['d1', 'd2'], species_id: 'donkey', offspring_entity_id: 'k2' })).status).toBe(201);
    const inbred = await post('/breed', { parents: ['k1', 'k2'], species_id: 'donkey' });
    expectError(inbred, 409, 'inbreeding_limit_exceeded');
    expect(inbred.body.details).toEqual({ inbreeding_coefficient: 0.25, max_coefficient: 0.2 });
    expect((await get('/entities/k1/genome')).body.breeding_count).toBe(0);
    expect((await get('/records?species_id=donkey')).body.pagination.total).toBe(2);
  });

  it('a platform admin reads raw alleles and hidden traits, and exact previews', async () => {
    await horseFor(adminToken);
    await founder('a1', adminToken, { alleles: { glow: { first: 'g1', second: 'g2' } } });
    await founder('a2', adminToken);
    const full = await get('/entities/a1/genome?full=true', adminToken);
    expect(full.status, full.text).toBe(200);
    expect(full.body).toMatchObject({ full: true, expressed: { glow: 'g1+g2' }, raw_alleles: { glow: { first: 'g1', second: 'g2' }, coat: expect.any(Object) } });
    const plain = await get('/entities/a1/genome', adminToken);
    expect(plain.body.expressed).not.toHaveProperty('glow');
    const exact = await post('/preview', { parents: ['a1', 'a2'], species_id: 'horse', exact: true }, adminToken);
    expect(exact.status, exact.text).toBe(200);
    expect(exact.body.exact).toBe(true);
    expect(exact.body.traits.map((trait: { trait_id: string }) => trait.trait_id)).toEqual(['coat', 'speed', 'glow']);
    const coat = exact.body.traits[0].exact as Record<string, number>;
    expect(Object.values(coat).reduce((sum, p) => sum + p, 0)).toBe(1);
    expect(exact.body.traits[1].exact).toMatchObject({ mean: expect.any(Number), stddev: 2 });
  });
});

describe('mutations of hidden traits', () => {
  const VEIL = { trait_id: 'veil', kind: 'mendelian', name: 'Veil', hidden: true, alleles: [{ id: 'v1', dominance: 2 }, { id: 'v2', dominance: 1 }], mutation: { rate: 1 } };
  async function veiledBreed(token: string) {
    for (const trait of [COAT, VEIL]) expect([201, 409]).toContain((await post('/traits', trait, token)).status);
    expect((await post('/species', { species_id: 'veiled', name: 'Veiled', parent_count: { min: 2, max: 2 }, traits: ['coat', 'veil'] }, token)).status).toBe(201);
    for (const entity_id of ['vp1', 'vp2']) expect((await post('/genomes', { entity_id, species_id: 'veiled' }, token)).status).toBe(201);
    const bred = await post('/breed', { parents: ['vp1', 'vp2'], species_id: 'veiled', seed: 's1' }, token);
    expect(bred.status, bred.text).toBe(201);
    return bred.body;
  }

  it("are shown to platform admins only, in the breed's answer and the records, and a preview's hint leaves hidden traits out", async () => {
    const user = await t.newUser('veil');
    const bred = await veiledBreed(user.token);
    expect(bred.mutations.filter((mutation: string) => mutation.startsWith('veil:'))).toEqual([]);
    const records = (await get('/records', user.token)).body.records;
    expect(records[0].mutations.filter((mutation: string) => mutation.startsWith('veil:'))).toEqual([]);
    expect((await post('/preview', { parents: ['vp1', 'vp2'], species_id: 'veiled' }, user.token)).body.mutation_hint).toBe('none');
    // The same breeding in an admin's tenant: the hidden trait did mutate (rate 1), and they see it.
    const admin = await veiledBreed(adminToken);
    expect(admin.mutations.some((mutation: string) => mutation.startsWith('veil:'))).toBe(true);
    expect((await get('/records', adminToken)).body.records[0].mutations).toEqual(admin.mutations);
  });
});

describe('list bounds', () => {
  it('page takes any safe integer (an empty page past the end), page_size above 100 is capped', async () => {
    const owner = await t.newUser('pages');
    await horseFor(owner.token);
    for (const [path, items] of [['/traits', 'traits'], ['/species', 'species'], ['/records', 'records']] as const) {
      const far = await get(`${path}?page=9007199254740991`, owner.token);
      expect(far.status, far.text).toBe(200);
      expect(far.body.pagination).toMatchObject({ page: 9007199254740991, page_size: 20, has_more: false });
      expect(far.body[items]).toEqual([]);
      const big = await get(`${path}?page_size=1000001`, owner.token);
      expect(big.status, big.text).toBe(200);
      expect(big.body.pagination.page_size).toBe(100);
      expectError(await get(`${path}?page=9007199254740992`, owner.token), 400, 'BAD_REQUEST');
      expectError(await get(`${path}?page_size=-1`, owner.token), 400, 'BAD_REQUEST');
    }
    // The first page still lists them.
    expect((await get('/species?page_size=1000001', owner.token)).body.species).toHaveLength(1);
  });
});
