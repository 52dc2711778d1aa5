import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../http/config.js';
import { gcPretenuringFrom, gcThreadsFrom, semiSpaceMbFrom, serverNodeArgs } from '../../http/node-flags.js';

// GC_SEMI_SPACE_MB=0 and GC_PRETENURING=on isolate GC_THREADS's flag in the first two tests.
const noSemi = { GC_SEMI_SPACE_MB: '0', GC_PRETENURING: 'on' };
const pretenuring = { GC_PRETENURING: 'on' };

describe('GC_THREADS, GC_SEMI_SPACE_MB, GC_PRETENURING and the server process flags', () => {
  it('auto: single-threaded GC on 2 cores or fewer, V8 defaults above', () => {
    expect(serverNodeArgs(noSemi, 1)).toEqual(['--single-threaded-gc']);
    expect(serverNodeArgs(noSemi, 2)).toEqual(['--single-threaded-gc']);
    expect(serverNodeArgs(noSemi, 3)).toEqual([]);
    expect(serverNodeArgs({ ...noSemi, GC_THREADS: 'auto' }, 16)).toEqual([]);
  });

  it('single and parallel override the core count', () => {
    expect(serverNodeArgs({ ...noSemi, GC_THREADS: 'single' }, 64)).toEqual(['--single-threaded-gc']);
    expect(serverNodeArgs({ ...noSemi, GC_THREADS: 'parallel' }, 2)).toEqual([]);
  });

  it('a 32 MiB semi-space by default, another size or V8 default (0) on request, anything else refused', () => {
    expect(serverNodeArgs(pretenuring, 2)).toEqual(['--single-threaded-gc', '--max-semi-space-size=32']);
    expect(serverNodeArgs({ ...pretenuring, GC_THREADS: 'parallel' }, 2)).toEqual(['--max-semi-space-size=32']);
    expect(serverNodeArgs({ ...pretenuring, GC_SEMI_SPACE_MB: '64' }, 8)).toEqual(['--max-semi-space-size=64']);
    expect(semiSpaceMbFrom(' ')).toBe(32);
    for (const bad of ['-1', '1.5', 'big', '2048']) expect(() => semiSpaceMbFrom(bad)).toThrow(/GC_SEMI_SPACE_MB/);
    expect(() => loadConfig({ GC_SEMI_SPACE_MB: 'x' })).toThrow(/GC_SEMI_SPACE_MB/);
    expect(loadConfig({}).gcSemiSpaceMb).toBe(32);
  });

  it("V8's allocation-site pretenuring off by default, on when asked; anything else refused", () => {
    expect(serverNodeArgs({}, 2)).toEqual(['--single-threaded-gc', '--max-semi-space-size=32', '--no-allocation-site-pretenuring']);
    expect(serverNodeArgs({ GC_PRETENURING: 'off', GC_THREADS: 'parallel', GC_SEMI_SPACE_MB: '0' }, 8)).toEqual(['--no-allocation-site-pretenuring']);
    expect(serverNodeArgs({ GC_PRETENURING: 'on', GC_THREADS: 'parallel', GC_SEMI_SPACE_MB: '0' }, 8)).toEqual([]);
    expect(gcPretenuringFrom(' ')).toBe('off');
    for (const bad of ['yes', '0', 'OFF']) expect(() => gcPretenuringFrom(bad)).toThrow(/GC_PRETENURING/);
    expect(() => loadConfig({ GC_PRETENURING: 'maybe' })).toThrow(/GC_PRETENURING/);
    expect(loadConfig({}).gcPretenuring).toBe('off');
  });

  it('refuses other values, at start (loadConfig) as in the start command', () => {
    expect(() => gcThreadsFrom('fast')).toThrow(/GC_THREADS/);
    expect(() => loadConfig({ GC_THREADS: 'two' })).toThrow(/GC_THREADS/);
    expect(loadConfig({}).gcThreads).toBe('auto');
  });

  it('npm start passes the flags the module prints, and V8 accepts them', () => {
    const pkg = JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.start).toContain('node $(node dist/http/node-flags.js) dist/http/server.js');
    // The flag itself starts a node (a typo in it would stop every start).
    expect(execFileSync(process.execPath, [...serverNodeArgs({ GC_THREADS: 'single' }), '-e', 'process.stdout.write("ok")'], { encoding: 'utf8' })).toBe('ok');
    expect(serverNodeArgs({ GC_THREADS: 'single' })).toContain('--no-allocation-site-pretenuring');
  });
});
