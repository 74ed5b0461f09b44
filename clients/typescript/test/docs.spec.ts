/**
 * The TypeScript examples of the adapters' pages (docs/agents-js.md, docs/langgraph-js.md)
 * run as written against the real service, `http://localhost:8080` rewritten to its
 * address. The Agents SDK's model is the service's own Responses API (`/v1/responses`),
 * its turns answered by the fake LLM, which echoes: the page's example needs no OpenAI key.
 */

import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, expect, test } from 'vitest';

import { AgentSessionsSaver, AgentSessionsSession } from '../src/index.js';
import { startService, type Service } from './service.js';

const docs = new URL('../../../docs/', import.meta.url);
const scratch = new URL('../.docs-blocks/', import.meta.url);
let service: Service;

beforeAll(async () => {
  service = await startService();
  mkdirSync(scratch, { recursive: true });
});

afterAll(async () => {
  await service?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

/** Runs the page's one block that imports the client, as a module of its own. */
async function runExample(page: string): Promise<void> {
  const text = readFileSync(new URL(page, docs), 'utf8');
  const blocks = [...text.matchAll(/```ts\n([\s\S]*?)```/g)]
    .map((match) => match[1])
    .filter((block) => block.includes("from 'agent-sessions-client'"));
  expect(blocks).toHaveLength(1);
  const file = new URL(page.replace('.md', '.ts'), scratch);
  writeFileSync(file, blocks[0].replaceAll('http://localhost:8080', service.url));
  await import(fileURLToPath(file));
}

test('docs/agents-js.md: two turns, their history in the service', async () => {
  process.env.OPENAI_BASE_URL = `${service.url}/v1`;
  process.env.OPENAI_API_KEY = 'the-service-needs-none';
  await runExample('agents-js.md');
  const session = new AgentSessionsSession({ sessionId: 'user-42', baseUrl: service.url });
  const history = await session.getItems();
  expect(history.map((item) => ('role' in item ? item.role : item.type))).toEqual([
    'user',
    'assistant',
    'user',
    'assistant',
  ]);
  expect(history[2]).toMatchObject({ role: 'user', content: 'What is my name?' });
});

test('docs/langgraph-js.md: paused, resumed, every step a checkpoint', async () => {
  await runExample('langgraph-js.md');
  const saver = new AgentSessionsSaver({ baseUrl: service.url });
  const newest = await saver.getTuple({ configurable: { thread_id: 'order-4711' } });
  expect(newest?.checkpoint.channel_values).toMatchObject({ item: 'a red bicycle', approved: true });
});
