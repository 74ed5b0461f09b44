/**
 * A live `@openai/agents` run keeping its history in the service: two turns with a tool
 * call between, the service restarted between the turns, and the whole history read
 * back. The model is a fake in this process (the Agents SDK's `Model` interface): it
 * calls the tool once, then answers with what the tool said, and records the input it
 * was given, so that the second turn shows the first turn came back from the service.
 */

import { Agent, Usage, run, tool, type AgentInputItem, type Model, type ModelRequest, type ModelResponse } from '@openai/agents';
import { afterAll, expect, test } from 'vitest';
import { z } from 'zod';

import { AgentSessionsSession } from '../src/index.js';
import { startService, type Service } from './service.js';

class ScriptedModel implements Model {
  readonly inputs: AgentInputItem[][] = [];

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const input = typeof request.input === 'string' ? [] : request.input;
    this.inputs.push(structuredClone(input));
    const last = input.at(-1) as { type?: string; output?: unknown } | undefined;
    const usage = new Usage({ requests: 1, inputTokens: 10, outputTokens: 5, totalTokens: 15 });
    if (last?.type === 'function_call_result') {
      const output = last.output as { text?: string } | string;
      const text = typeof output === 'string' ? output : (output.text ?? '');
      return { usage, output: [message(`The forecast says: ${text}`)], responseId: `r-${this.inputs.length}` };
    }
    return {
      usage,
      output: [
        {
          type: 'function_call',
          callId: `call-${this.inputs.length}`,
          name: 'forecast',
          status: 'completed',
          arguments: JSON.stringify({ city: 'Paris' }),
        },
      ],
      responseId: `r-${this.inputs.length}`,
    };
  }

  getStreamedResponse(): AsyncIterable<never> {
    throw new Error('this test runs without streaming');
  }
}

function message(text: string) {
  return {
    type: 'message' as const,
    role: 'assistant' as const,
    status: 'completed' as const,
    content: [{ type: 'output_text' as const, text }],
  };
}

const services: Service[] = [];

afterAll(async () => {
  for (const service of services) await service.stop();
});

test('two turns with a tool call, across a restart of the service, keep their history', async () => {
  const model = new ScriptedModel();
  let calls = 0;
  const forecast = tool({
    name: 'forecast',
    description: 'The weather tomorrow in a city',
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls += 1;
      return `sunny in ${city}`;
    },
  });
  const agent = new Agent({ name: 'Weather', instructions: 'Answer about the weather.', model, tools: [forecast] });
  const sessionId = `agents-run-${crypto.randomUUID()}`;

  const first = await startService();
  services.push(first);
  const firstSession = new AgentSessionsSession({ sessionId, baseUrl: first.url });
  const one = await run(agent, 'Will it rain in Paris tomorrow?', { session: firstSession });
  expect(one.finalOutput).toBe('The forecast says: sunny in Paris');
  await first.stop({ keepDatabase: true });

  const second = await startService({ databaseUrl: first.databaseUrl });
  services.push(second);
  const session = new AgentSessionsSession({ sessionId, baseUrl: second.url });
  const two = await run(agent, 'And in Paris again?', { session });
  expect(two.finalOutput).toBe('The forecast says: sunny in Paris');
  expect(calls).toBe(2);

  // The second turn's first model call was given the whole first turn, from the service.
  const secondTurnInput = model.inputs[2];
  expect(secondTurnInput.map(kind)).toEqual([
    'user',
    'function_call',
    'function_call_result',
    'assistant',
    'user',
  ]);
  const history = await session.getItems();
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
  expect(history.at(-1)).toMatchObject({ role: 'assistant', content: [{ text: 'The forecast says: sunny in Paris' }] });
});

function kind(item: AgentInputItem): string {
  return 'role' in item && item.role !== undefined && (item as { type?: string }).type !== 'function_call'
    ? String(item.role)
    : String((item as { type?: string }).type);
}
