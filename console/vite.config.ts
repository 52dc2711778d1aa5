import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The operator console: static assets built by `npm run build` into dist/console and served by
 * every node under /console/ (http/console.ts). No CDN at run time: everything is bundled.
 */
const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/console/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: { outDir: fileURLToPath(new URL('../dist/console', import.meta.url)), emptyOutDir: true, sourcemap: true },
});
