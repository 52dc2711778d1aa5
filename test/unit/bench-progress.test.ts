import { describe, expect, it } from 'vitest';
import { formatBenchProgress, formatRunProgress, formatSeconds, parsePosition } from '../../bench/support/progress-format.js';

/** The benchmark runner's progress line: the file's place in the run, the scenario, the time left. */
describe('bench progress', () => {
  it('names the file of the run, the scenario of the file and the time left in a timed phase', () => {
    const progress = {
      file: { index: 3, count: 12 },
      area: 'mq',
      scenario: { index: 4, count: 6, name: 'send + receive + delete over HTTP' },
      phase: { label: 'load', started_ms: 1_000, duration_ms: 10_000, upTo: false },
    };
    expect(formatBenchProgress(progress, 6_900)).toBe('[3/12] mq 4/6: send + receive + delete over HTTP, load 4.1 s left');
    expect(formatBenchProgress({ ...progress, phase: { ...progress.phase, label: 'loop', upTo: true } }, 1_000)).toBe('[3/12] mq 4/6: send + receive + delete over HTTP, loop at most 10.0 s left');
    expect(formatBenchProgress({ area: 'liveness' }, 0)).toBe('liveness');
  });

  it('never shows negative time, and minutes past one', () => {
    expect(formatSeconds(-5)).toBe('0.0 s');
    expect(formatSeconds(125_000)).toBe('2 min 05 s');
  });

  it('reads the position run-all.ts passes, and refuses nonsense', () => {
    expect(parsePosition('3/12')).toEqual({ index: 3, count: 12 });
    expect(parsePosition(undefined)).toBeUndefined();
    expect(parsePosition('13/12')).toBeUndefined();
    expect(parsePosition('0/12')).toBeUndefined();
  });

  it('guesses the run\'s time left from the files done', () => {
    expect(formatRunProgress({ index: 1, count: 4 }, 'auctions.bench.js', [])).toBe('[1/4] auctions.bench.js');
    // 2 files in 30 s: 15 s each, 2 left (this one included) -> 30 s.
    expect(formatRunProgress({ index: 3, count: 4 }, 'mq.bench.js', [10, 20])).toBe('[3/4] mq.bench.js (2 done in 30.0 s; about 30.0 s left at their mean)');
  });
});
