import { defineConfig } from 'vitest/config';

/**
 * `npm run console:screenshots` only (not part of the suite): takes a screenshot of every page of
 * the console into docs/console/ and refreshes the index in docs/console.md.
 */
export default defineConfig({
  test: {
    include: ['test/screenshots/*.screens.ts'],
    testTimeout: 180_000,
    hookTimeout: 60_000,
  },
});
