/**
 * A live `@openai/agents` run keeping its history in the service: two turns, each with a
 * tool call, each in a Node process of its own, the service restarted between them, and
 * the whole history read back. The model is scripted (test/programs/weather_turn.ts); the
 * second turn's first model call shows that the first turn came back from the service.
 */

import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import type { AgentInputItem } from '@openai/agents';
import { afterAll, expect, test } from 'vitest';

import { AgentSessionsSession } from '../src/index.js';
import { startService, type Service } from './service.js';

// The program as tsc compiled it (npm test compiles before it runs vitest).
const program = fileURLToPath(new URL('../dist/test/programs/weather_turn.js', import.meta.url));

async function turn(url: string, sessionId: string, input: string) {
  const { stdout } = await promisify(execFile)(process.execPath, [program, url, sessionId, input]);
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as { finalOutput: string; firstModelInput: string[] };
}

const services: Service[] = [];

afterAll(async () => {
  for (const service of services) await service.stop();
});

test('two turns with a tool call, in two processes, across a restart of the service', async () => {
  const sessionId = `agents-run-${crypto.randomUUID()}`;
  const first = await startService();
  services.push(first);
  const one = await turn(first.url, sessionId, 'Will it rain in Paris tomorrow?');
  expect(one).toEqual({ finalOutput: 'The forecast says: sunny in Paris', firstModelInput: ['user'] });
  await first.stop({ keepDatabase: true });

  const second = await startService({ databaseUrl: first.databaseUrl });
  services.push(second);
  const two = await turn(second.url, sessionId, 'And in Paris again?');
  expect(two).toEqual({
    finalOutput: 'The forecast says: sunny in Paris',
    firstModelInput: ['user', 'function_call', 'function_call_result', 'assistant', 'user'],
  });

  const history = await new AgentSessionsSession({ sessionId, baseUrl: second.url }).getItems();
  expect(history.map(kind)).toEqual([
    'user',
    'function_call',
    'function_call_result',
    'assistant',
    'user',
    'function_call',
    'function_call_result',
    'assistant',
  ]);
  expect(history[0]).toMatchObject({ role: 'user', content: 'Will it rain in Paris tomorrow?' });
  expect(history[4]).toMatchObject({ role: 'user', content: 'And in Paris again?' });
  expect(history.at(-1)).toMatchObject({ role: 'assistant', content: [{ text: 'The forecast says: sunny in Paris' }] });
});

function kind(item: AgentInputItem): string {
  return 'role' in item && item.role !== undefined ? String(item.role) : String((item as { type?: string }).type);
}
