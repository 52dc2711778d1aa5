import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: run files two at a time so process-spawning tests do not starve.
    maxWorkers: 2,
    // Files share a worker's module cache: importing the whole edge again for every file took 262 of
    // the 620 s of the non-cluster run (298 s in all without it). Nothing here mocks modules or
    // mutates the environment; every file starts and closes its own nodes.
    isolate: false,
    reporters: ['default', './test/helpers/summary-reporter.ts'],
  },
});
