/**
 * What the validation suite does not ask of `AgentSessionsSaver`: a listing of one
 * checkpoint by id keeps the listing's other conditions (limit, filter, before), as
 * LangGraph's MemorySaver does.
 */

import { emptyCheckpoint, uuid6, type CheckpointMetadata } from '@langchain/langgraph-checkpoint';
import { afterAll, beforeAll, expect, test } from 'vitest';

import { AgentSessionsSaver } from '../src/index.js';
import { startService, type Service } from './service.js';

let service: Service;

beforeAll(async () => {
  service = await startService();
});

afterAll(async () => {
  await service?.stop();
});

test('one checkpoint listed by id, with a limit, a filter and a before', async () => {
  const saver = new AgentSessionsSaver({ baseUrl: service.url });
  const thread = { configurable: { thread_id: `saver-${crypto.randomUUID()}`, checkpoint_ns: '' } };
  const metadata: CheckpointMetadata = { source: 'input', step: -1, parents: {} };
  const first = await saver.put(thread, { ...emptyCheckpoint(), id: uuid6(-1) }, metadata, {});
  const second = await saver.put(first, { ...emptyCheckpoint(), id: uuid6(-1) }, { ...metadata, step: 0 }, {});

  const listed = async (options: Parameters<AgentSessionsSaver['list']>[1]) => {
    const ids = [];
    for await (const tuple of saver.list(first, options)) ids.push(tuple.config.configurable?.checkpoint_id);
    return ids;
  };
  const id = first.configurable?.checkpoint_id;
  expect(await listed({})).toEqual([id]);
  expect(await listed({ limit: 0 })).toEqual([]);
  expect(await listed({ filter: { step: -1 } })).toEqual([id]);
  expect(await listed({ filter: { step: 0 } })).toEqual([]);
  expect(await listed({ before: second })).toEqual([id]);
  expect(await listed({ before: first })).toEqual([]);
});
