/** Tenants of their own for tests that list everything their tenant holds. */

import { connect, createApiKey } from '../src/index.js';

/** A key of a new tenant of the service at `url`, made with its `adminKey`. */
export async function newTenantKey(url: string, adminKey: string): Promise<string> {
  const admin = connect({ baseUrl: url, apiKey: adminKey });
  const tenant = `t-${crypto.randomUUID()}`;
  const made = await createApiKey({ client: admin, body: { tenant, name: tenant } });
  if (!made.data) throw new Error(`the service made no key: ${made.response.status}`);
  return made.data.key;
}
