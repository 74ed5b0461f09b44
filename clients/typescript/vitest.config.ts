import { fileURLToPath } from 'node:url';

import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // The docs' examples import the package by its name.
    alias: { 'agent-sessions-client': fileURLToPath(new URL('./src/index.ts', import.meta.url)) },
  },
  test: {
    include: ['test/**/*.spec.ts'],
    // The checkpoint validation package calls describe/it/beforeAll as globals.
    globals: true,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
