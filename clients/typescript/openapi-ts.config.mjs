// `npm run generate`: src/generated from the service's openapi.yaml. The output is
// committed; `npm run check-generated` fails when it differs from a fresh generation.
import { defineConfig } from '@hey-api/openapi-ts';

export default defineConfig({
  input: '../../openapi.yaml',
  output: { path: 'src/generated' },
  plugins: ['@hey-api/client-fetch', '@hey-api/typescript', '@hey-api/sdk'],
});
