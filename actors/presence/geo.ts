/**
 * Great-circle distance and a geohash-grid spatial index for presence
 * sessions. Pure: no I/O, no clock.
 *
 * The index keeps every point in the geohash grid of each length 1..8
 * (a geohash of length L splits longitude into 2^ceil(5L/2) columns and
 * latitude into 2^floor(5L/2) rows; a cell is one geohash). A search takes
 * the bounding box of the circle, picks the finest length whose cells cover
 * that box with at most SEARCH_CELLS_MAX cells, and measures the haversine
 * distance only to the points in those cells: the work is proportional to
 * the points near the query, not to every point in the context.
 */

export const EARTH_RADIUS_METERS = 6_371_008.8;
/** Half the circumference: no two points on the sphere are farther apart. */
export const RADIUS_METERS_MAX = Math.PI * EARTH_RADIUS_METERS;
export const GEOHASH_LENGTH_MAX = 8;
const SEARCH_CELLS_MAX = 32;
const DEG = Math.PI / 180;
/** Widens the bounding box a little so rounding never drops a point on the circle. */
const BOX_MARGIN_DEGREES = 1e-7;

export interface GeoPoint {
  lat: number;
  lon: number;
}

export function haversineMeters(a: GeoPoint, b: GeoPoint): number {
  const phi1 = a.lat * DEG;
  const phi2 = b.lat * DEG;
  const sinHalfDPhi = Math.sin((phi2 - phi1) / 2);
  const sinHalfDLambda = Math.sin(((b.lon - a.lon) * DEG) / 2);
  const h = sinHalfDPhi * sinHalfDPhi + Math.cos(phi1) * Math.cos(phi2) * sinHalfDLambda * sinHalfDLambda;
  return 2 * EARTH_RADIUS_METERS * Math.asin(Math.min(1, Math.sqrt(h)));
}

export function isValidPoint(point: GeoPoint): boolean {
  return Number.isFinite(point.lat) && Number.isFinite(point.lon) && point.lat >= -90 && point.lat <= 90 && point.lon >= -180 && point.lon <= 180;
}

// ---- the geohash grid ----

interface Grid {
  columns: number;
  rows: number;
  cellWidthDegrees: number;
  cellHeightDegrees: number;
}

const grids: Grid[] = [];
for (let length = 0; length <= GEOHASH_LENGTH_MAX; length++) {
  const lonBits = Math.ceil((5 * length) / 2);
  const latBits = Math.floor((5 * length) / 2);
  grids.push({ columns: 2 ** lonBits, rows: 2 ** latBits, cellWidthDegrees: 360 / 2 ** lonBits, cellHeightDegrees: 180 / 2 ** latBits });
}

function columnOf(grid: Grid, lon: number): number {
  return Math.min(grid.columns - 1, Math.max(0, Math.floor((lon + 180) / grid.cellWidthDegrees)));
}

function rowOf(grid: Grid, lat: number): number {
  return Math.min(grid.rows - 1, Math.max(0, Math.floor((lat + 90) / grid.cellHeightDegrees)));
}

/** The cell of a point in the grid of one geohash length, as a number (column * rows + row). */
export function cellOf(point: GeoPoint, length: number): number {
  const grid = grids[length];
  return columnOf(grid, point.lon) * grid.rows + rowOf(grid, point.lat);
}

const BASE32 = '0123456789bcdefghjkmnpqrstuvwxyz';

/** The standard geohash of a point (bits interleaved, longitude first). */
export function geohash(point: GeoPoint, length: number): string {
  let latMin = -90;
  let latMax = 90;
  let lonMin = -180;
  let lonMax = 180;
  let hash = '';
  let bits = 0;
  let value = 0;
  let even = true;
  while (hash.length < length) {
    if (even) {
      const middle = (lonMin + lonMax) / 2;
      if (point.lon >= middle) {
        value = value * 2 + 1;
        lonMin = middle;
      } else {
        value *= 2;
        lonMax = middle;
      }
    } else {
      const middle = (latMin + latMax) / 2;
      if (point.lat >= middle) {
        value = value * 2 + 1;
        latMin = middle;
      } else {
        value *= 2;
        latMax = middle;
      }
    }
    even = !even;
    if (++bits === 5) {
      hash += BASE32[value];
      bits = 0;
      value = 0;
    }
  }
  return hash;
}

/** The centre of the geohash cell of `length` containing the point (privacy rounding). */
export function snapToCell(point: GeoPoint, length: number): GeoPoint {
  const grid = grids[length];
  const lon = (columnOf(grid, point.lon) + 0.5) * grid.cellWidthDegrees - 180;
  const lat = (rowOf(grid, point.lat) + 0.5) * grid.cellHeightDegrees - 90;
  return { lat, lon };
}

// ---- the bounding box of a circle on the sphere ----

export interface BoundingBox {
  latMin: number;
  latMax: number;
  /** May extend past -180/180 (the box crosses the antimeridian); null = every longitude. */
  lonMin: number | null;
  lonMax: number | null;
}

/** The latitude/longitude box that contains every point within `radius_m` of `centre`. */
export function boundingBox(centre: GeoPoint, radius_m: number): BoundingBox {
  const angular = radius_m / EARTH_RADIUS_METERS;
  const angularDegrees = angular / DEG + BOX_MARGIN_DEGREES;
  const latMin = centre.lat - angularDegrees;
  const latMax = centre.lat + angularDegrees;
  if (latMin <= -90 || latMax >= 90 || angular >= Math.PI / 2) {
    // The circle reaches a pole (or half the sphere): every longitude.
    return { latMin: Math.max(-90, latMin), latMax: Math.min(90, latMax), lonMin: null, lonMax: null };
  }
  const ratio = Math.sin(angular) / Math.cos(centre.lat * DEG);
  if (ratio >= 1) return { latMin, latMax, lonMin: null, lonMax: null };
  const lonDelta = Math.asin(ratio) / DEG + BOX_MARGIN_DEGREES;
  if (lonDelta >= 180) return { latMin, latMax, lonMin: null, lonMax: null };
  return { latMin, latMax, lonMin: centre.lon - lonDelta, lonMax: centre.lon + lonDelta };
}

/** The cells of one geohash length that cover a box, or null when there are more than `max`. */
export function coveringCells(box: BoundingBox, length: number, max: number): number[] | null {
  const grid = grids[length];
  const rowFirst = rowOf(grid, box.latMin);
  const rowLast = rowOf(grid, box.latMax);
  let columns: number[];
  if (box.lonMin === null || box.lonMax === null) {
    if (grid.columns * (rowLast - rowFirst + 1) > max) return null;
    columns = Array.from({ length: grid.columns }, (_, i) => i);
  } else {
    const first = Math.floor((box.lonMin + 180) / grid.cellWidthDegrees);
    const last = Math.min(Math.floor((box.lonMax + 180) / grid.cellWidthDegrees), first + grid.columns - 1);
    if ((last - first + 1) * (rowLast - rowFirst + 1) > max) return null;
    columns = [];
    // Columns past either edge wrap around the antimeridian.
    for (let c = first; c <= last; c++) columns.push(((c % grid.columns) + grid.columns) % grid.columns);
  }
  const cells: number[] = [];
  for (const column of columns) {
    for (let row = rowFirst; row <= rowLast; row++) cells.push(column * grid.rows + row);
  }
  return cells;
}

// ---- the index ----

export interface NearbyHit<T> {
  item: T;
  distance_m: number;
}

/**
 * Points (any object carrying its position) indexed in the geohash grids of
 * lengths 1..8. Insert and remove cost 8 map updates; a move within the same
 * length-8 cell costs nothing.
 */
export class GeoIndex<T> {
  /** levels[L]: geohash-L cell -> the items in it. */
  private readonly levels: Map<number, Set<T>>[] = [];
  private count = 0;

  constructor() {
    for (let length = 0; length <= GEOHASH_LENGTH_MAX; length++) this.levels.push(new Map());
  }

  get size(): number {
    return this.count;
  }

  insert(item: T, point: GeoPoint): void {
    for (let length = 1; length <= GEOHASH_LENGTH_MAX; length++) {
      const cell = cellOf(point, length);
      const level = this.levels[length];
      let members = level.get(cell);
      if (!members) level.set(cell, (members = new Set()));
      members.add(item);
    }
    this.count++;
  }

  remove(item: T, point: GeoPoint): void {
    let found = false;
    for (let length = 1; length <= GEOHASH_LENGTH_MAX; length++) {
      const cell = cellOf(point, length);
      const level = this.levels[length];
      const members = level.get(cell);
      if (members?.delete(item)) {
        found = true;
        if (members.size === 0) level.delete(cell);
      }
    }
    if (found) this.count--;
  }

  /**
   * Moves an item. Only the lengths whose cell changed are touched: from the
   * finest length down, the first length where the cell stays the same ends
   * the work (a geohash cell lies inside the cell of every shorter length).
   */
  move(item: T, from: GeoPoint, to: GeoPoint): void {
    for (let length = GEOHASH_LENGTH_MAX; length >= 1; length--) {
      const before = cellOf(from, length);
      const after = cellOf(to, length);
      if (before === after) return;
      const level = this.levels[length];
      const members = level.get(before);
      if (members?.delete(item) && members.size === 0) level.delete(before);
      let target = level.get(after);
      if (!target) level.set(after, (target = new Set()));
      target.add(item);
    }
  }

  /**
   * Every item within `radius_m` of `centre` (great-circle distance),
   * nearest first. `positionOf` gives an item's current position; `accept`
   * can drop items (for example expired sessions) before they are measured.
   */
  search(centre: GeoPoint, radius_m: number, positionOf: (item: T) => GeoPoint, accept: (item: T) => boolean = () => true): NearbyHit<T>[] {
    const box = boundingBox(centre, radius_m);
    let length = GEOHASH_LENGTH_MAX;
    let cells = coveringCells(box, length, SEARCH_CELLS_MAX);
    while (cells === null && length > 1) cells = coveringCells(box, --length, SEARCH_CELLS_MAX);
    // Length 1 has 32 cells in all, so the loop always ends with a cover.
    const hits: NearbyHit<T>[] = [];
    const level = this.levels[length];
    for (const cell of cells!) {
      const members = level.get(cell);
      if (!members) continue;
      for (const item of members) {
        if (!accept(item)) continue;
        const distance_m = haversineMeters(centre, positionOf(item));
        if (distance_m <= radius_m) hits.push({ item, distance_m });
      }
    }
    hits.sort((a, b) => a.distance_m - b.distance_m);
    return hits;
  }
}
