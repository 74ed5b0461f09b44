/**
 * `@langchain/langgraph-checkpoint-validation`, LangGraph's own checks of a checkpoint
 * saver, against `AgentSessionsSaver` on the real service. Each saver it makes is a new
 * tenant's, so that listings across threads see only that saver's checkpoints.
 */

import { validate } from '@langchain/langgraph-checkpoint-validation';

import { AgentSessionsSaver } from '../src/index.js';
import { startService, type Service } from './service.js';
import { newTenantKey } from './tenants.js';

const adminKey = `admin-${crypto.randomUUID()}`;
let service: Service;

validate<AgentSessionsSaver>({
  checkpointerName: 'AgentSessionsSaver',
  beforeAllTimeout: 60_000,
  async beforeAll() {
    service = await startService({ adminKey });
  },
  async afterAll() {
    await service?.stop();
  },
  async createCheckpointer() {
    const apiKey = await newTenantKey(service.url, adminKey);
    return new AgentSessionsSaver({ baseUrl: service.url, apiKey });
  },
});
