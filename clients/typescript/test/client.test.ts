import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  appendItems,
  connect,
  createRun,
  followRun,
  getRun,
  getSession,
  getCheckpoint,
  getSessionState,
  getUserState,
  listCheckpoints,
  listItems,
  mergeAppState,
  mergeSessionState,
  popLastItem,
  putCheckpoint,
  putCheckpointWrites,
  replaceSessionState,
  type Client,
  type RunEvent,
} from '../src/index.js';
import { startService, type Service } from './service.js';

let service: Service;

before(async () => {
  service = await startService();
});

after(async () => {
  await service?.stop();
});

const sessionId = () => `ts-${crypto.randomUUID()}`;

test('the generated functions speak to the service, errors included', async () => {
  const client = connect({ baseUrl: service.url });
  const id = sessionId();
  const appended = await appendItems({
    client,
    path: { session_id: id },
    body: { items: [{ role: 'user', content: 'one' }, { role: 'assistant', content: 'two' }] },
  });
  assert.equal(appended.response.status, 201);
  assert.equal(appended.data?.data.length, 2);

  const newest = await listItems({ client, path: { session_id: id }, query: { order: 'desc', limit: 1 } });
  assert.deepEqual(
    newest.data?.data.map((item) => item.item),
    [{ role: 'assistant', content: 'two' }],
  );
  const popped = await popLastItem({ client, path: { session_id: id } });
  assert.deepEqual(popped.data?.item, { role: 'assistant', content: 'two' });

  const missing = await getSession({ client, path: { session_id: sessionId() } });
  assert.equal(missing.response.status, 404);
  assert.equal(missing.error?.code, 'session_not_found');
});

test('state is written with If-Match, and a stale revision is refused', async () => {
  const client = connect({ baseUrl: service.url });
  const id = sessionId();
  const made = await replaceSessionState({ client, path: { session_id: id }, body: { state: { step: 1 } } });
  assert.equal(made.response.status, 200);
  assert.equal(made.response.headers.get('etag'), '"1"');
  const merged = await mergeSessionState({
    client,
    path: { session_id: id },
    headers: { 'If-Match': '"1"' },
    body: { state: { step: 2, plan: ['a'] } },
  });
  assert.deepEqual(merged.data, { state: { step: 2, plan: ['a'] }, revision: 2 });
  const stale = await mergeSessionState({
    client,
    path: { session_id: id },
    headers: { 'If-Match': '"1"' },
    body: { state: { step: 3 } },
  });
  assert.equal(stale.response.status, 412);
  assert.equal(stale.error?.code, 'revision_mismatch');
  const read = await getSessionState({ client, path: { session_id: id } });
  assert.deepEqual(read.data?.state, { step: 2, plan: ['a'] });
});

test("an append's deltas reach the documents its app and user share", async () => {
  const client = connect({ baseUrl: service.url });
  const id = sessionId();
  const app = `app-${id}`;
  const appended = await appendItems({
    client,
    path: { session_id: id },
    body: {
      items: [{ role: 'user', content: 'hi' }],
      app_id: app,
      user_id: 'ada',
      user_state_delta: { name: 'Ada' },
      app_state_delta: { tier: 'pro' },
    },
  });
  assert.equal(appended.response.status, 201);
  const user = await getUserState({ client, path: { app_id: app, user_id: 'ada' } });
  assert.deepEqual(user.data, { state: { name: 'Ada' }, revision: 1 });
  const merged = await mergeAppState({
    client,
    path: { app_id: app },
    headers: { 'If-Match': '"1"' },
    body: { state: { tier: null, seats: 3 } },
  });
  assert.deepEqual(merged.data, { state: { seats: 3 }, revision: 2 });
  const read = await getSessionState({ client, path: { session_id: id }, query: { include: 'user,app' } });
  assert.deepEqual(read.data, {
    state: {},
    revision: 1,
    user_state: { name: 'Ada' },
    app_state: { seats: 3 },
  });
});

test('a checkpoint reads back with its blob and writes', async () => {
  const client = connect({ baseUrl: service.url });
  const id = sessionId();
  const data = Buffer.from('state').toString('base64');
  const saved = await putCheckpoint({
    client,
    path: { session_id: id, checkpoint_id: '0001' },
    body: {
      checkpoint: { type: 'json', data },
      metadata: { step: 0 },
      channel_versions: { messages: '1' },
      blobs: [{ channel: 'messages', version: '1', type: 'json', data }],
    },
  });
  assert.equal(saved.response.status, 200);
  const written = await putCheckpointWrites({
    client,
    path: { session_id: id, checkpoint_id: '0001' },
    body: { task_id: 't', writes: [{ idx: 0, channel: 'messages', type: 'json', data }] },
  });
  assert.equal(written.response.status, 204);
  const got = await getCheckpoint({ client, path: { session_id: id, checkpoint_id: '0001' } });
  assert.equal(got.data?.blobs[0]?.data, data);
  assert.equal(got.data?.writes.length, 1);
  const newest = await listCheckpoints({ client, path: { session_id: id }, query: { limit: 1 } });
  assert.deepEqual(
    newest.data?.data.map((c) => c.id),
    ['0001'],
  );
});

test('an append whose answer was lost is sent again with its key, and lands once', async () => {
  let lost = 0;
  // The service takes the first request; its answer never reaches the client.
  const losing: typeof fetch = async (input, init) => {
    const method = input instanceof Request ? input.method : (init?.method ?? 'GET');
    const response = await fetch(input, init);
    if (method === 'POST' && lost === 0) {
      lost++;
      await response.body?.cancel();
      throw new TypeError('fetch failed: the connection was reset');
    }
    return response;
  };
  const retry = { maxRetries: 3, backoffBaseMs: 1, backoffMaxMs: 5, maxRetryAfterMs: 1000 };
  const client = connect({ baseUrl: service.url, fetch: losing, retry });
  const id = sessionId();
  const appended = await appendItems({
    client,
    path: { session_id: id },
    body: { items: [{ role: 'user', content: 'only once' }] },
  });
  assert.equal(lost, 1);
  assert.equal(appended.response.status, 201);
  const items = await listItems({ client, path: { session_id: id } });
  assert.deepEqual(
    items.data?.data.map((item) => item.item),
    [{ role: 'user', content: 'only once' }],
  );
});

test("a run's events arrive in order, each once, to the one that ends the stream", async () => {
  const client = connect({ baseUrl: service.url });
  const id = sessionId();
  const created = await createRun({
    client,
    path: { session_id: id },
    body: { input: 'tell me a story', background: true },
  });
  assert.equal(created.response.status, 202);
  const runId = created.data!.id;
  const events = await everyEvent(client, id, runId);
  assertEachOnce(events);
  assert.equal(events[0]!.event, 'run.created');
  assert.equal(events.at(-1)!.event, 'run.completed');
  assert.equal(deltas(events), 'echo: tell me a story');
  const run = await getRun({ client, path: { session_id: id, run_id: runId } });
  assert.equal(run.data?.status, 'completed');
});

test('a stream cut mid-run goes on after the last event seen', async () => {
  let cuts = 0;
  let follows = 0;
  // The first events stream breaks after its third event, as a dropped connection does.
  const cutting: typeof fetch = async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    const response = await fetch(input, init);
    if (!url.endsWith('/events')) return response;
    if (follows++ > 0) return response;
    const cut = () => cuts++;
    return new Response(cutAfter(response.body!, 3, cut), { headers: response.headers });
  };
  const client = connect({ baseUrl: service.url, fetch: cutting });
  const id = sessionId();
  const created = await createRun({
    client,
    path: { session_id: id },
    body: { input: 'a long tale of many words', background: true },
  });
  const events = await everyEvent(client, id, created.data!.id);
  assert.equal(cuts, 1);
  assert.equal(follows, 2, 'followed again after the cut');
  assertEachOnce(events);
  assert.equal(events.at(-1)!.event, 'run.completed');
  assert.equal(deltas(events), 'echo: a long tale of many words');
});

test('a follow answered 503 while it reconnects follows again', async () => {
  let follows = 0;
  // The first stream breaks; the replica reached next answers 503, as one shutting
  // down behind a balancer does; the one after serves.
  const flaky: typeof fetch = async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (url.endsWith('/events') && ++follows === 2) {
      return new Response('{"code": "shutting_down"}', { status: 503 });
    }
    const response = await fetch(input, init);
    if (!url.endsWith('/events') || follows > 1) return response;
    return new Response(cutAfter(response.body!, 2, () => {}), { headers: response.headers });
  };
  const retry = { maxRetries: 0, backoffBaseMs: 1, backoffMaxMs: 5, maxRetryAfterMs: 1000 };
  const client = connect({ baseUrl: service.url, fetch: flaky, retry });
  const id = sessionId();
  const created = await createRun({
    client,
    path: { session_id: id },
    body: { input: 'a tale told twice', background: true },
  });
  const events = await everyEvent(client, id, created.data!.id);
  assert.equal(follows, 3);
  assertEachOnce(events);
  assert.equal(deltas(events), 'echo: a tale told twice');
});

test('a follow stops when its signal aborts, and closes its stream', async () => {
  const client = connect({ baseUrl: service.url });
  const id = sessionId();
  const words = Array.from({ length: 40 }, (_, n) => `w${n}`).join(' ');
  const created = await createRun({
    client,
    path: { session_id: id },
    body: { input: words, background: true },
  });
  const stop = new AbortController();
  const seen: RunEvent[] = [];
  const follow = (async () => {
    for await (const event of followRun(client, { sessionId: id, runId: created.data!.id }, {
      signal: stop.signal,
    })) {
      seen.push(event);
      if (event.event === 'message.delta') stop.abort();
    }
  })();
  await assert.rejects(follow, { name: 'AbortError' });
  assert.equal(seen.at(-1)!.event, 'message.delta');
  assert.ok(!seen.some((e) => e.event === 'run.completed'), 'stopped before the run ended');
});

test('following a run that does not exist throws the answer', async () => {
  const client = connect({ baseUrl: service.url });
  const follow = followRun(client, { sessionId: sessionId(), runId: crypto.randomUUID() });
  await assert.rejects(follow.next(), /404/);
});

/** A run's events, followed to the one that ends them. */
async function everyEvent(client: Client, sessionId: string, runId: string): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  for await (const event of followRun(client, { sessionId, runId })) events.push(event);
  return events;
}

function assertEachOnce(events: RunEvent[]): void {
  assert.deepEqual(
    events.map((e) => Number(e.id)),
    events.map((_, n) => n + 1),
    'each event once, in order',
  );
}

function deltas(events: RunEvent[]): string {
  return events.map((e) => (e.event === 'message.delta' ? e.data.delta : '')).join('');
}

/** The body, broken off (as a reset connection) right after its `events`-th event. */
function cutAfter(
  body: ReadableStream<Uint8Array>,
  events: number,
  cut: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let text = '';
  return new ReadableStream({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) return controller.close();
      const sent = text.length;
      text += decoder.decode(value, { stream: true });
      // Where the `events`-th whole event ends, comments and keep-alives not counted.
      let seen = 0;
      let end = -1;
      for (let at = text.indexOf('\n\n'), from = 0; at >= 0; at = text.indexOf('\n\n', from)) {
        if (/^id:/m.test(text.slice(from, at)) && ++seen === events) {
          end = at + 2;
          break;
        }
        from = at + 2;
      }
      if (end < 0) return controller.enqueue(encoder.encode(text.slice(sent)));
      controller.enqueue(encoder.encode(text.slice(sent, end)));
      cut();
      await reader.cancel();
      controller.error(new TypeError('terminated: the connection was reset'));
    },
  });
}
