// Clients of the service, from a page on another origin: the `openai` package (which
// sends its `x-stainless-*` headers), the TypeScript client (which resumes a run's
// events with `Last-Event-ID`) and its framework adapters (which replace history and
// put checkpoints with PUT, under If-Match read from ETag). The test calls these
// through `window` and reads what the browser let through.
import OpenAI from 'openai';
import {
  AgentSessionsSaver,
  AgentSessionsSession,
  DEFAULT_RETRY,
  connect,
  createRun,
  followRun,
} from 'agent-sessions-client';

window.withOpenai = async (baseUrl) => {
  const openai = new OpenAI({
    baseURL: `${baseUrl}/v1`,
    apiKey: 'unused',
    dangerouslyAllowBrowser: true,
    maxRetries: 0,
  });
  const models = [];
  for await (const model of openai.models.list()) models.push(model.id);
  const { data: response, response: raw } = await openai.responses
    .create({ model: models[0], input: 'hello from a page' })
    .withResponse();
  return { models, text: response.output_text, requestId: raw.headers.get('x-request-id') };
};

window.withClient = async (baseUrl, sessionId) => {
  const client = connect({ baseUrl, retry: { ...DEFAULT_RETRY, maxRetries: 0 } });
  const { data: run, error, response } = await createRun({
    client,
    path: { session_id: sessionId },
    body: { input: 'hello again', background: true },
    headers: { 'Idempotency-Key': `page-${sessionId}` },
  });
  if (!run) throw error instanceof Error ? error : new Error(JSON.stringify(error));
  const seen = [];
  for await (const event of followRun(client, { sessionId, runId: run.id })) {
    seen.push(event);
    if (seen.length === 2) break;
  }
  // Resumed from the second event: the browser must let `Last-Event-ID` through.
  const rest = [];
  for await (const event of followRun(client, { sessionId, runId: run.id }, { lastEventId: seen[1].id })) {
    rest.push(event.event);
  }
  return {
    first: seen.map((event) => event.event),
    rest,
    location: response.headers.get('location'),
    requestId: response.headers.get('x-request-id'),
  };
};

window.withAdapters = async (baseUrl, sessionId) => {
  const session = new AgentSessionsSession({ sessionId, baseUrl });
  const said = (role, content) => ({ role, content });
  await session.addItems([said('user', 'one'), said('assistant', 'two')]);
  const replace = {
    operationId: `page-${sessionId}`,
    transaction: {
      type: 'replace_suffix',
      expectedSuffix: [said('assistant', 'two')],
      replacement: [said('assistant', 'three')],
    },
  };
  await session.applyHistoryTransaction(replace);
  // The same operation again, as a retry would send it: nothing more happens.
  await session.applyHistoryTransaction(replace);
  const items = await session.getItems();

  const saver = new AgentSessionsSaver({ baseUrl });
  const thread = { configurable: { thread_id: `${sessionId}-graph`, checkpoint_ns: '' } };
  const checkpoint = {
    v: 4,
    id: crypto.randomUUID(),
    ts: new Date().toISOString(),
    channel_values: { topic: 'bicycles' },
    channel_versions: { topic: 1 },
    versions_seen: {},
  };
  const saved = await saver.put(thread, checkpoint, { source: 'input', step: -1, parents: {} }, { topic: 1 });
  const tuple = await saver.getTuple(saved);
  return { items, values: tuple.checkpoint.channel_values };
};

window.ready = true;
