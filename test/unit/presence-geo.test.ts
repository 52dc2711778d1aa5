import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { boundingBox, cellOf, GeoIndex, geohash, haversineMeters, snapToCell, type GeoPoint } from '../../actors/presence/geo.js';

/** Great-circle distance and the geohash-grid index, checked against brute force. */

describe('haversine', () => {
  it('matches known distances', () => {
    const paris = { lat: 48.8566, lon: 2.3522 };
    const london = { lat: 51.5074, lon: -0.1278 };
    expect(haversineMeters(paris, london) / 1000).toBeCloseTo(343.9, 0);
    expect(haversineMeters(paris, paris)).toBe(0);
    // A quarter of a great circle, and half of it (antipodes).
    expect(haversineMeters({ lat: 0, lon: 0 }, { lat: 90, lon: 0 })).toBeCloseTo((Math.PI / 2) * 6_371_008.8, 3);
    expect(haversineMeters({ lat: 0, lon: 0 }, { lat: 0, lon: 180 })).toBeCloseTo(Math.PI * 6_371_008.8, 3);
    // Across the antimeridian the short way round.
    expect(haversineMeters({ lat: 0, lon: 179.9 }, { lat: 0, lon: -179.9 })).toBeCloseTo(22_239, -1);
  });
});

describe('geohash grid', () => {
  it('encodes the reference example', () => {
    expect(geohash({ lat: 57.64911, lon: 10.40744 }, 11)).toBe('u4pruydqqvj');
    expect(geohash({ lat: 42.6, lon: -5.6 }, 5)).toBe('ezs42');
  });

  it('two points share a grid cell exactly when they share a geohash of that length', () => {
    // Micro-degree coordinates: a point is either exactly on a cell edge or clearly off it, so the
    // comparison is not about the last bit of floating-point rounding next to an edge.
    const point = fc.record({
      lat: fc.integer({ min: -90_000_000, max: 90_000_000 }).map((x) => x / 1e6),
      lon: fc.integer({ min: -180_000_000, max: 180_000_000 }).map((x) => x / 1e6),
    });
    fc.assert(
      fc.property(point, point, fc.integer({ min: 1, max: 8 }), (a, b, length) => {
        // Skip the two edges where geohash and the clamped grid both put the point in the last cell anyway.
        fc.pre(a.lat < 90 && b.lat < 90 && a.lon < 180 && b.lon < 180);
        expect(cellOf(a, length) === cellOf(b, length)).toBe(geohash(a, length) === geohash(b, length));
        expect(geohash(snapToCell(a, length), length)).toBe(geohash(a, length));
      }),
      { numRuns: 500 },
    );
  });

  it('bounding boxes contain their circle', () => {
    fc.assert(
      fc.property(
        fc.double({ min: -89.9, max: 89.9, noNaN: true }),
        fc.double({ min: -180, max: 180, noNaN: true }),
        fc.double({ min: 1, max: 2_000_000, noNaN: true }),
        fc.double({ min: 0, max: 2 * Math.PI, noNaN: true }),
        (lat, lon, radius, bearing) => {
          // The point at `radius` along `bearing` lies inside the box.
          const R = 6_371_008.8;
          const d = radius / R;
          const phi1 = (lat * Math.PI) / 180;
          const phi2 = Math.asin(Math.sin(phi1) * Math.cos(d) + Math.cos(phi1) * Math.sin(d) * Math.cos(bearing));
          const lambda2 = (lon * Math.PI) / 180 + Math.atan2(Math.sin(bearing) * Math.sin(d) * Math.cos(phi1), Math.cos(d) - Math.sin(phi1) * Math.sin(phi2));
          const target = { lat: (phi2 * 180) / Math.PI, lon: ((((lambda2 * 180) / Math.PI + 540) % 360) - 180) };
          const box = boundingBox({ lat, lon }, radius);
          expect(target.lat).toBeGreaterThanOrEqual(box.latMin - 1e-9);
          expect(target.lat).toBeLessThanOrEqual(box.latMax + 1e-9);
          if (box.lonMin !== null && box.lonMax !== null) {
            const inRange = (x: number) => x >= box.lonMin! - 1e-9 && x <= box.lonMax! + 1e-9;
            expect(inRange(target.lon) || inRange(target.lon + 360) || inRange(target.lon - 360)).toBe(true);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('GeoIndex search = brute force', () => {
  interface Item {
    id: number;
    at: GeoPoint;
  }

  function bruteForce(items: Item[], centre: GeoPoint, radius: number): number[] {
    return items
      .map((item) => ({ id: item.id, d: haversineMeters(centre, item.at) }))
      .filter((x) => x.d <= radius)
      .sort((a, b) => a.d - b.d || a.id - b.id)
      .map((x) => x.id);
  }

  function indexed(index: GeoIndex<Item>, centre: GeoPoint, radius: number): number[] {
    return index
      .search(centre, radius, (item) => item.at)
      .sort((a, b) => a.distance_m - b.distance_m || a.item.id - b.item.id)
      .map((hit) => hit.item.id);
  }

  // Points anywhere, points clustered around a centre (so small radii find something), and the awkward places:
  // the poles, the antimeridian, the equator and the prime meridian.
  const anywhere = fc.record({ lat: fc.double({ min: -90, max: 90, noNaN: true }), lon: fc.double({ min: -180, max: 180, noNaN: true }) });
  const edgy = fc.record({
    lat: fc.oneof(fc.constantFrom(-90, 90, 0, 89.9999, -89.9999), fc.double({ min: -90, max: 90, noNaN: true })),
    lon: fc.oneof(fc.constantFrom(-180, 180, 0, 179.9999, -179.9999), fc.double({ min: -180, max: 180, noNaN: true })),
  });
  const near = (centre: GeoPoint, spread: number) =>
    fc.record({
      lat: fc.double({ min: Math.max(-90, centre.lat - spread), max: Math.min(90, centre.lat + spread), noNaN: true }),
      lon: fc.double({ min: -180, max: 180, noNaN: true }).map((x) => (centre.lon + ((x / 180) * spread) + 540) % 360 - 180),
    });

  it('finds exactly the points a full scan finds, in distance order (random points, radii and centres)', () => {
    const scenario = edgy.chain((centre) =>
      fc.record({
        centre: fc.constant(centre),
        spread: fc.constantFrom(0.01, 0.5, 5, 60),
        radius: fc.oneof(fc.double({ min: 0, max: 5000, noNaN: true }), fc.double({ min: 0, max: 500_000, noNaN: true }), fc.double({ min: 0, max: 20_000_000, noNaN: true })),
      }).chain(({ centre: c, spread, radius }) =>
        fc.record({
          centre: fc.constant(c),
          radius: fc.constant(radius),
          points: fc.array(fc.oneof(near(c, spread), anywhere, edgy), { minLength: 0, maxLength: 120 }),
        }),
      ),
    );
    fc.assert(
      fc.property(scenario, ({ centre, radius, points }) => {
        const index = new GeoIndex<Item>();
        const items = points.map((at, id) => ({ id, at }));
        for (const item of items) index.insert(item, item.at);
        expect(indexed(index, centre, radius)).toEqual(bruteForce(items, centre, radius));
      }),
      { numRuns: 400 },
    );
  });

  it('stays exact through moves and removals', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(anywhere, anywhere, fc.boolean()), { maxLength: 60 }),
        edgy,
        fc.double({ min: 0, max: 3_000_000, noNaN: true }),
        (moves, centre, radius) => {
          const index = new GeoIndex<Item>();
          const items = moves.map(([from], id) => ({ id, at: from }));
          for (const item of items) index.insert(item, item.at);
          const kept: Item[] = [];
          moves.forEach(([, to, removed], i) => {
            const item = items[i];
            if (removed) index.remove(item, item.at);
            else {
              index.move(item, item.at, to);
              item.at = to;
              kept.push(item);
            }
          });
          expect(index.size).toBe(kept.length);
          expect(indexed(index, centre, radius)).toEqual(bruteForce(kept, centre, radius));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('looks at few candidates for a small radius among many points', () => {
    const index = new GeoIndex<Item>();
    let visited = 0;
    // 10,000 points on a 100 x 100 grid about 500 m apart.
    for (let i = 0; i < 10_000; i++) {
      const item = { id: i, at: { lat: 48 + Math.floor(i / 100) * 0.0045, lon: 2 + (i % 100) * 0.0068 } };
      index.insert(item, item.at);
    }
    const hits = index.search({ lat: 48.2, lon: 2.3 }, 1000, (item) => {
      visited++;
      return item.at;
    });
    expect(hits.length).toBeGreaterThan(5);
    expect(visited).toBeLessThan(200);
  });
});
