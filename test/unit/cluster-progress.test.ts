import { describe, expect, it } from 'vitest';
import { estimateProgress, formatDuration, formatProgress, shouldPrintLine } from '../../cluster/progress.js';

/** The drain and rebalance progress of the operator CLI: counts, ETA from timed samples, the line. */
describe('estimateProgress', () => {
  it('has no ETA until something has moved', () => {
    expect(estimateProgress([], 8)).toEqual({ done: 0, total: 8, percent: 0, eta_ms: null });
    expect(estimateProgress([{ at_ms: 0, done: 0 }, { at_ms: 5_000, done: 0 }], 8)).toEqual({ done: 0, total: 8, percent: 0, eta_ms: null });
  });

  it('projects the remaining count at the rate seen', () => {
    // 2 moved in 4 s: 6 left take 12 s.
    expect(estimateProgress([{ at_ms: 1_000, done: 0 }, { at_ms: 3_000, done: 1 }, { at_ms: 5_000, done: 2 }], 8)).toEqual({ done: 2, total: 8, percent: 25, eta_ms: 12_000 });
  });

  it('follows the recent pace, and falls back to the whole run when the window saw no move', () => {
    const samples = [{ at_ms: 0, done: 0 }, { at_ms: 1_000, done: 4 }, { at_ms: 60_000, done: 5 }, { at_ms: 70_000, done: 6 }];
    // Within the last 30 s: 1 moved in 10 s (60 s -> 70 s); 4 left take 40 s.
    expect(estimateProgress(samples, 10, 30_000).eta_ms).toBe(40_000);
    // Stalled for the whole window: the run's rate, 4 in 100 s; 6 left take 150 s.
    expect(estimateProgress([{ at_ms: 0, done: 0 }, { at_ms: 10_000, done: 4 }, { at_ms: 100_000, done: 4 }], 10, 30_000).eta_ms).toBe(150_000);
  });

  it('is done at the total, and an empty total is done', () => {
    expect(estimateProgress([{ at_ms: 0, done: 3 }], 3)).toEqual({ done: 3, total: 3, percent: 100, eta_ms: 0 });
    expect(estimateProgress([], 0).percent).toBe(100);
  });
});

describe('the progress line', () => {
  it('says what moved out of what, and the time left', () => {
    expect(formatProgress('drain n2', { done: 3, total: 8, percent: 37, eta_ms: 4_100 })).toBe('drain n2: 3/8 partitions moved (37%), about 4.1 s left');
    expect(formatProgress('rebalance', { done: 0, total: 2, percent: 0, eta_ms: null })).toBe('rebalance: 0/2 partitions moved (0%), time left unknown until one moves');
    expect(formatProgress('drain n2', { done: 8, total: 8, percent: 100, eta_ms: 0 })).toBe('drain n2: 8/8 partitions moved (100%), done');
  });

  it('formats durations for people', () => {
    expect(formatDuration(850)).toBe('850 ms');
    expect(formatDuration(4_149)).toBe('4.1 s');
    expect(formatDuration(125_000)).toBe('2 min 05 s');
  });

  it('prints off a terminal when the count changes, else once per period', () => {
    expect(shouldPrintLine(null, 0, 0, 10_000)).toBe(true);
    expect(shouldPrintLine({ done: 1, at_ms: 0 }, 1, 9_000, 10_000)).toBe(false);
    expect(shouldPrintLine({ done: 1, at_ms: 0 }, 2, 1_000, 10_000)).toBe(true);
    expect(shouldPrintLine({ done: 1, at_ms: 0 }, 1, 10_000, 10_000)).toBe(true);
  });
});
