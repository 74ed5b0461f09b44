// Fails when src/generated is not what `npm run generate` makes of openapi.yaml now:
// the service's API changed and the client was not regenerated.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { createClient } from '@hey-api/openapi-ts';

// defineConfig answers a promise of the configuration.
const config = await (await import('../openapi-ts.config.mjs')).default;

const fresh = mkdtempSync(join(tmpdir(), 'agent-sessions-generated-'));
try {
  await createClient({ ...config, output: { ...config.output, path: fresh }, logs: { level: 'silent' } });
  const files = (dir) =>
    readdirSync(dir)
      .flatMap((name) => {
        const path = join(dir, name);
        return statSync(path).isDirectory() ? files(path) : [path];
      });
  const listed = (dir) => new Map(files(dir).map((path) => [relative(dir, path), readFileSync(path, 'utf8')]));
  const [committed, expected] = [listed('src/generated'), listed(fresh)];
  const stale = [...new Set([...committed.keys(), ...expected.keys()])]
    .filter((path) => committed.get(path) !== expected.get(path))
    .sort();
  if (stale.length > 0) {
    console.error(`src/generated is stale (${stale.join(', ')}): run \`npm run generate\` and commit`);
    process.exitCode = 1;
  } else {
    console.log('src/generated matches openapi.yaml');
  }
} finally {
  rmSync(fresh, { recursive: true, force: true });
}
