import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../http/config.js';
import { gcThreadsFrom, serverNodeArgs } from '../../http/node-flags.js';

describe('GC_THREADS and the server process flags', () => {
  it('auto: single-threaded GC on 2 cores or fewer, V8 defaults above', () => {
    expect(serverNodeArgs({}, 1)).toEqual(['--single-threaded-gc']);
    expect(serverNodeArgs({}, 2)).toEqual(['--single-threaded-gc']);
    expect(serverNodeArgs({}, 3)).toEqual([]);
    expect(serverNodeArgs({ GC_THREADS: 'auto' }, 16)).toEqual([]);
  });

  it('single and parallel override the core count', () => {
    expect(serverNodeArgs({ GC_THREADS: 'single' }, 64)).toEqual(['--single-threaded-gc']);
    expect(serverNodeArgs({ GC_THREADS: 'parallel' }, 2)).toEqual([]);
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
    expect(execFileSync(process.execPath, ['--single-threaded-gc', '-e', 'process.stdout.write("ok")'], { encoding: 'utf8' })).toBe('ok');
  });
});
