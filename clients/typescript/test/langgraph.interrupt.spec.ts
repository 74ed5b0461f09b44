/**
 * A LangGraph.js graph paused by `interrupt()` in one Node process and resumed in
 * another, its checkpoints kept by the service (restarted between the two, too).
 */

import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { afterAll, expect, test } from 'vitest';

import { AgentSessionsSaver } from '../src/index.js';
import { startService, type Service } from './service.js';

// The program as tsc compiled it (npm test compiles before it runs vitest).
const program = fileURLToPath(new URL('../dist/test/programs/approval_graph.js', import.meta.url));

async function runGraph(...args: string[]): Promise<{ result: Record<string, unknown>; next: string[] }> {
  const { stdout } = await promisify(execFile)(process.execPath, [program, ...args]);
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '');
}

const services: Service[] = [];

afterAll(async () => {
  for (const service of services) await service.stop();
});

test('paused in one process, resumed in another, across a restart of the service', async () => {
  const threadId = `graph-${crypto.randomUUID()}`;
  const first = await startService();
  services.push(first);

  const paused = await runGraph(first.url, threadId, 'start');
  expect(paused.next).toEqual(['approve']);
  expect(paused.result.steps).toEqual(['drafted a refund for order 4711']);
  expect(paused.result.__interrupt__).toMatchObject([{ value: { question: 'Send the refund?' } }]);
  await first.stop({ keepDatabase: true });

  const second = await startService({ databaseUrl: first.databaseUrl });
  services.push(second);
  const resumed = await runGraph(second.url, threadId, 'resume', 'yes');
  expect(resumed.next).toEqual([]);
  expect(resumed.result).toMatchObject({
    request: 'order 4711',
    decision: 'yes',
    steps: ['drafted a refund for order 4711', 'a person said yes', 'sent'],
  });

  // The thread's checkpoints are in the service, newest first, each after its parent.
  const saver = new AgentSessionsSaver({ baseUrl: second.url });
  const history = [];
  for await (const tuple of saver.list({ configurable: { thread_id: threadId } })) history.push(tuple);
  expect(history.length).toBeGreaterThanOrEqual(5);
  for (const [index, tuple] of history.slice(0, -1).entries()) {
    expect(tuple.parentConfig?.configurable?.checkpoint_id).toBe(history[index + 1].config.configurable?.checkpoint_id);
  }
});
