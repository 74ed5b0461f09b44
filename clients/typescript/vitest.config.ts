import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts'],
    // The checkpoint validation package calls describe/it/beforeAll as globals.
    globals: true,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
