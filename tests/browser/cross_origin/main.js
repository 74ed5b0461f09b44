// Two clients of the service, from a page on another origin: the `openai` package (which
// sends its `x-stainless-*` headers) and the TypeScript client (which resumes a run's
// events with `Last-Event-ID`). The test calls these through `window` and reads what
// the browser let through.
import OpenAI from 'openai';
import { DEFAULT_RETRY, connect, createRun, followRun } from 'agent-sessions-client';

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

window.ready = true;
