import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The layering rules of the architecture, checked on the source text:
 * actors/ never imports http/ or cluster/ or a storage library, and reads
 * neither the wall clock nor Math.random; runtime/ knows no actor kind and no
 * HTTP; http/ reaches storage only in its composition root (node.ts) and
 * reaches an area's actors only through its messages.ts; cluster/ knows
 * nothing of http/.
 */
const root = new URL('../..', import.meta.url).pathname;

function sources(folder: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith('.ts')) found.push(path);
    }
  };
  walk(join(root, folder));
  return found;
}

function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)[^'"]*from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1]);
}

describe('layering', () => {
  it('actors/ imports neither http/, cluster/ nor storage, and reads no wall clock or randomness', () => {
    for (const file of sources('actors')) {
      const name = relative(root, file);
      for (const target of imports(file)) {
        expect(target, `${name} imports ${target}`).not.toMatch(/\/http\/|\/cluster\/|^lmdb$|^fastify|store-lmdb/);
      }
      const code = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '');
      expect(code, `${name} reads the wall clock`).not.toMatch(/Date\.now\(|new Date\(\)|performance\.now\(/);
      expect(code, `${name} uses Math.random`).not.toMatch(/Math\.random\(/);
    }
  });

  it('runtime/ imports no actor kind, no http/ and no cluster/', () => {
    for (const file of sources('runtime')) {
      for (const target of imports(file)) {
        expect(target, `${relative(root, file)} imports ${target}`).not.toMatch(/\/actors\/|\/http\/|\/cluster\/|^fastify/);
      }
    }
  });

  it('http/ reaches storage only through its composition root', () => {
    for (const file of sources('http')) {
      const name = relative(root, file);
      if (name === join('http', 'node.ts')) continue;
      const text = readFileSync(file, 'utf8');
      expect(text, `${name} touches storage`).not.toMatch(/LmdbStore|from 'lmdb'|storage-keys/);
    }
  });

  it('http/ imports from actors/ only an area\'s messages.ts', () => {
    for (const file of sources('http')) {
      const name = relative(root, file);
      for (const target of imports(file)) {
        const area = /\/actors\/([^/]+)\/([^/]+)$/.exec(target);
        if (!area) continue;
        // Kinds of the node itself (signing key, idempotency records) are the edge's own machinery.
        if (area[1] === 'system' || area[1] === 'idempotency') continue;
        expect(`${area[1]}/${area[2]}`, `${name} imports ${target}`).toMatch(/^[^/]+\/messages\.js$/);
      }
    }
  });

  it('cluster/ imports no http/, and its logic takes time and timers through its ports', () => {
    // The real port implementations and the operator tools (processes, not cluster logic) may use the system's.
    const real = new Set(['ports.ts', 'etcd-coordination.ts', 'cli.ts', 'local.ts', 'etcd-process.ts', 'free-port.ts'].map((f) => join('cluster', f)));
    for (const file of sources('cluster')) {
      const name = relative(root, file);
      for (const target of imports(file)) expect(target, `${name} imports ${target}`).not.toMatch(/\/http\//);
      if (real.has(name) || name.startsWith(join('cluster', 'transport'))) continue;
      const code = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '');
      expect(code, `${name} calls the system clock or timers`).not.toMatch(/Date\.now\(|performance\.now\(|setTimeout\(|setInterval\(|setImmediate\(/);
    }
  });
});
