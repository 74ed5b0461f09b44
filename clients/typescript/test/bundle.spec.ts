/**
 * Both adapters go into a browser bundle: vite builds one for the browser from an entry
 * that imports them, and nothing in it imports a Node module (vite stubs such an import
 * with an empty `__vite-browser-external`, which would fail in a page at its first use).
 */

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { build, type Rollup } from 'vite';
import { expect, test } from 'vitest';

test('a browser bundle of both adapters imports nothing of Node', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-sessions-bundle-'));
  try {
    const index = fileURLToPath(new URL('../src/index.ts', import.meta.url));
    const entry = join(dir, 'entry.ts');
    writeFileSync(
      entry,
      `import { AgentSessionsSaver, AgentSessionsSession } from ${JSON.stringify(index)};\n` +
        'export const made = [AgentSessionsSaver, AgentSessionsSession];\n',
    );
    const output = (await build({
      configFile: false,
      logLevel: 'silent',
      root: dir,
      build: {
        write: false,
        minify: false,
        lib: { entry, formats: ['es'], fileName: 'bundle' },
      },
    })) as Rollup.RollupOutput[];
    const code = output
      .flatMap((result) => result.output)
      .map((chunk) => ('code' in chunk ? chunk.code : ''))
      .join('\n');
    expect(code).toMatch(/AgentSessionsSession = class|class AgentSessionsSession/);
    expect(code).toMatch(/AgentSessionsSaver = class|class AgentSessionsSaver/);
    expect(code).not.toMatch(/from\s*["']node:|require\(["']node:|__vite[-_]browser[-_]external/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
