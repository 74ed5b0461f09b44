/**
 * One turn of an `@openai/agents` agent whose history is kept by the service:
 * `node weather_turn.js <service url> <session id> <input>`. The model is scripted (the
 * Agents SDK's `Model` interface): it calls the `forecast` tool, then answers with what
 * the tool said. Prints, as JSON on its last line, the final output and what the
 * model's first call of the turn was given (each item's role or type).
 */

import { Agent, Usage, run, tool, type AgentInputItem, type Model, type ModelRequest, type ModelResponse } from '@openai/agents';
import { z } from 'zod';

import { AgentSessionsSession } from '../../src/index.js';

class ScriptedModel implements Model {
  readonly inputs: AgentInputItem[][] = [];

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const input = typeof request.input === 'string' ? [] : request.input;
    this.inputs.push(structuredClone(input));
    const last = input.at(-1) as { type?: string; output?: unknown } | undefined;
    const usage = new Usage({ requests: 1, inputTokens: 10, outputTokens: 5, totalTokens: 15 });
    const responseId = `r-${this.inputs.length}`;
    if (last?.type === 'function_call_result') {
      const output = last.output as { text?: string } | string;
      const text = typeof output === 'string' ? output : (output.text ?? '');
      const answer = { type: 'message' as const, role: 'assistant' as const, status: 'completed' as const };
      return { usage, responseId, output: [{ ...answer, content: [{ type: 'output_text', text: `The forecast says: ${text}` }] }] };
    }
    const call = { type: 'function_call' as const, callId: `call-${crypto.randomUUID()}`, status: 'completed' as const };
    return { usage, responseId, output: [{ ...call, name: 'forecast', arguments: JSON.stringify({ city: 'Paris' }) }] };
  }

  getStreamedResponse(): AsyncIterable<never> {
    throw new Error('this program runs without streaming');
  }
}

const forecast = tool({
  name: 'forecast',
  description: 'The weather tomorrow in a city',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `sunny in ${city}`,
});

const [baseUrl, sessionId, input] = process.argv.slice(2);
const model = new ScriptedModel();
const agent = new Agent({ name: 'Weather', instructions: 'Answer about the weather.', model, tools: [forecast] });
const result = await run(agent, input, { session: new AgentSessionsSession({ sessionId, baseUrl }) });
const kinds = model.inputs[0].map((item) =>
  'role' in item && item.role !== undefined ? String(item.role) : String((item as { type?: string }).type),
);
console.log(JSON.stringify({ finalOutput: result.finalOutput, firstModelInput: kinds }));
