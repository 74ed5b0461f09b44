/**
 * `AgentSessionsSession` against the real service: every behaviour the Agents SDK's own
 * tests ask of its in-memory `Session` (packages/agents-core/test/memorySession.test.ts
 * and the session type guards of session.test.ts), checked here in our words, with
 * "before anything is sent" checked by counting the requests.
 */

import {
  isSessionHistoryRewriteAwareSession,
  isSessionHistoryTransactionAwareSession,
  type AgentInputItem,
  type SessionHistoryTransactionArgs,
} from '@openai/agents-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

import {
  AgentSessionsError,
  AgentSessionsSession,
  connect,
  getSession,
  HISTORY_EPOCH_KEY,
} from '../src/index.js';
import { startService, type Service } from './service.js';

let service: Service;

beforeAll(async () => {
  service = await startService();
});

afterAll(async () => {
  await service?.stop();
});

const said = (text: string): AgentInputItem => ({
  role: 'user',
  content: [{ type: 'input_text', text }],
});

/** A session of its own, and how many requests it has sent. */
function fresh(sessionId = `agents-${crypto.randomUUID()}`) {
  const sent = { count: 0 };
  const counting: typeof fetch = (input, init) => {
    sent.count += 1;
    return fetch(input, init);
  };
  const client = connect({ baseUrl: service.url, fetch: counting });
  return { session: new AgentSessionsSession({ sessionId, client }), sent, sessionId };
}

async function seeded(...items: AgentInputItem[]) {
  const made = fresh();
  await made.session.addItems(items);
  return made;
}

describe('the Session protocol', () => {
  test('keeps, lists, limits, pops and clears items', async () => {
    const { session, sessionId } = await seeded(said('hello'));
    expect(await session.getSessionId()).toBe(sessionId);
    expect(await session.getItems()).toEqual([said('hello')]);

    await session.addItems([said('one'), said('two')]);
    expect(await session.getItems()).toEqual([said('hello'), said('one'), said('two')]);
    expect(await session.getItems(2)).toEqual([said('one'), said('two')]);
    expect(await session.getItems(0)).toEqual([]);

    expect(await session.popItem()).toEqual(said('two'));
    expect(await session.getItems()).toEqual([said('hello'), said('one')]);

    await session.clearSession();
    expect(await session.getItems()).toEqual([]);
    expect(await session.getItems(3)).toEqual([]);
    expect(await session.popItem()).toBeUndefined();
  });

  test('a session never written is empty, and clearing it is harmless', async () => {
    const { session } = fresh();
    expect(await session.getItems()).toEqual([]);
    expect(await session.popItem()).toBeUndefined();
    await session.clearSession();
    expect(await session.getItems()).toEqual([]);
  });

  test('a read of several pages that a pop crossed starts again', async () => {
    const sessionId = `agents-${crypto.randomUUID()}`;
    const items = Array.from({ length: 1_500 }, (_, n) => said(`item ${n}`));
    await fresh(sessionId).session.addItems(items);
    let popped = false;
    // The first time a second page is asked for, the item it would start after goes.
    const crossing: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      if (!popped && new URL(request.url).searchParams.has('after')) {
        popped = true;
        await fetch(`${service.url}/v1/sessions/${sessionId}/items/last`, { method: 'DELETE' });
        await fetch(`${service.url}/v1/sessions/${sessionId}/items`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ items: [said('late')] }),
        });
      }
      return fetch(request);
    };
    const session = new AgentSessionsSession({ sessionId, client: connect({ baseUrl: service.url, fetch: crossing }) });
    expect(await session.getItems()).toEqual([...items.slice(0, -1), said('late')]);
    expect(popped).toBe(true);
  });

  test('pages through a history longer than one page, whole and by limit', async () => {
    const { session } = fresh();
    const items = Array.from({ length: 1_205 }, (_, n) => said(`item ${n}`));
    await session.addItems(items);
    expect(await session.getItems()).toEqual(items);
    expect(await session.getItems(1_100)).toEqual(items.slice(-1_100));
  });

  test('what it answers and what it was given are copies', async () => {
    const { session } = await seeded(said('start'));
    const items = await session.getItems();
    (items[0] as { content: unknown }).content = 'mutated';
    expect(await session.getItems()).toEqual([said('start')]);

    const next = said('next');
    await session.addItems([next]);
    (next as { content: unknown }).content = 'mutated';
    expect(await session.getItems()).toEqual([said('start'), said('next')]);

    const popped = await session.popItem();
    expect(popped).toEqual(said('next'));
    (popped as { content: unknown }).content = 'mutated';
    expect(await session.getItems()).toEqual([said('start')]);
  });

  test('declares the history rewrites and transactions it takes', () => {
    const { session } = fresh();
    expect(isSessionHistoryTransactionAwareSession(session)).toBe(true);
    expect(isSessionHistoryRewriteAwareSession(session)).toBe(true);
  });
});

describe('history mutations and compaction', () => {
  const call = (id: string, args: string): AgentInputItem => ({
    type: 'function_call',
    id,
    callId: 'call-1',
    name: 'lookup',
    status: 'completed',
    arguments: args,
  });

  test('a rewritten function call takes the first call’s place and drops the others', async () => {
    const { session } = await seeded(said('start'), call('old-1', '{"ok":false}'), call('old-2', '{"dup":true}'), said('after'));
    const replacement = call('new', '{"ok":true}');
    await session.applyHistoryMutations({
      mutations: [{ type: 'replace_function_call', callId: 'call-1', replacement: replacement as never }],
    });
    expect(await session.getItems()).toEqual([said('start'), replacement, said('after')]);
  });

  test('compaction replaces the whole history in one write', async () => {
    const { session, sent } = await seeded(said('a'), said('b'), said('c'));
    const before = sent.count;
    const marker: AgentInputItem = { type: 'compaction', encrypted_content: 'summary' } as AgentInputItem;
    await session.replaceHistoryWithCompaction([marker, said('c')]);
    expect(sent.count - before).toBe(1);
    expect(await session.getItems()).toEqual([marker, said('c')]);
  });
});

describe('history transactions', () => {
  test('an append is applied once, also when retried after later appends', async () => {
    const { session, sessionId } = await seeded(said('start'));
    const committed = said('committed');
    await session.applyHistoryTransaction({
      operationId: 'append-1',
      transaction: { type: 'append_items', items: [committed] },
    });
    (committed as { content: unknown }).content = 'mutated';
    await session.addItems([said('later')]);
    await session.applyHistoryTransaction({
      operationId: 'append-1',
      transaction: { type: 'append_items', items: [said('committed')] },
    });
    // A retry from another process (another object on the same session) is a no-op too.
    const elsewhere = fresh(sessionId).session;
    await elsewhere.applyHistoryTransaction({
      operationId: 'append-1',
      transaction: { type: 'append_items', items: [said('committed')] },
    });
    expect(await session.getItems()).toEqual([said('start'), said('committed'), said('later')]);
  });

  test('a suffix is replaced once, also when retried after later appends', async () => {
    const { session } = await seeded(said('start'), said('blocked'));
    const args: SessionHistoryTransactionArgs = {
      operationId: 'replace-1',
      transaction: { type: 'replace_suffix', expectedSuffix: [said('blocked')], replacement: [said('accepted')] },
    };
    await session.applyHistoryTransaction(args);
    await session.addItems([said('later')]);
    await session.applyHistoryTransaction(args);
    expect(await session.getItems()).toEqual([said('start'), said('accepted'), said('later')]);
  });

  test('a replacement that keeps its suffix is a no-op when retried', async () => {
    const { session } = await seeded(said('start'), said('kept'));
    const args: SessionHistoryTransactionArgs = {
      operationId: 'replace-keeps-suffix',
      transaction: { type: 'replace_suffix', expectedSuffix: [said('kept')], replacement: [said('new'), said('kept')] },
    };
    await session.applyHistoryTransaction(args);
    await session.applyHistoryTransaction(args);
    expect(await session.getItems()).toEqual([said('start'), said('new'), said('kept')]);
  });

  test('a replacement under an operation id an append used is refused', async () => {
    const { session } = await seeded(said('start'));
    await session.applyHistoryTransaction({
      operationId: 'append-then-replace',
      transaction: { type: 'append_items', items: [said('appended')] },
    });
    await expect(
      session.applyHistoryTransaction({
        operationId: 'append-then-replace',
        transaction: { type: 'replace_suffix', expectedSuffix: [said('appended')], replacement: [] },
      }),
    ).rejects.toThrow('already applied with a different transaction');
    expect(await session.getItems()).toEqual([said('start'), said('appended')]);
  });

  test('a suffix that covers the whole history replaces all of it', async () => {
    const { session } = await seeded(said('a'), said('b'));
    await session.applyHistoryTransaction({
      operationId: 'replace-all',
      transaction: { type: 'replace_suffix', expectedSuffix: [said('a'), said('b')], replacement: [said('c')] },
    });
    expect(await session.getItems()).toEqual([said('c')]);
  });

  test('a suffix that does not match changes nothing and records nothing', async () => {
    const { session } = await seeded(said('start'));
    await expect(
      session.applyHistoryTransaction({
        operationId: 'replace-after-conflict',
        transaction: { type: 'replace_suffix', expectedSuffix: [said('different')], replacement: [said('accepted')] },
      }),
    ).rejects.toThrow('suffix no longer matches');
    expect(await session.getItems()).toEqual([said('start')]);

    await session.applyHistoryTransaction({
      operationId: 'replace-after-conflict',
      transaction: { type: 'replace_suffix', expectedSuffix: [said('start')], replacement: [said('accepted')] },
    });
    expect(await session.getItems()).toEqual([said('accepted')]);
  });

  test('an operation id used for other content is refused', async () => {
    const { session } = fresh();
    await session.applyHistoryTransaction({
      operationId: 'conflict',
      transaction: { type: 'append_items', items: [said('first')] },
    });
    await expect(
      session.applyHistoryTransaction({
        operationId: 'conflict',
        transaction: { type: 'append_items', items: [said('second')] },
      }),
    ).rejects.toThrow('already applied with a different transaction');
    expect(await session.getItems()).toEqual([said('first')]);
  });

  test('an empty append is recorded', async () => {
    const { session } = fresh();
    await session.applyHistoryTransaction({
      operationId: 'empty',
      transaction: { type: 'append_items', items: [] },
    });
    await expect(
      session.applyHistoryTransaction({
        operationId: 'empty',
        transaction: { type: 'append_items', items: [said('unexpected')] },
      }),
    ).rejects.toThrow('already applied with a different transaction');
    expect(await session.getItems()).toEqual([]);
  });

  test('a cleared session forgets its operation ids', async () => {
    const { session, sessionId } = fresh();
    const args: SessionHistoryTransactionArgs = {
      operationId: 'after-reset',
      transaction: { type: 'append_items', items: [said('committed')] },
    };
    await session.applyHistoryTransaction(args);
    await session.clearSession();
    await session.applyHistoryTransaction(args);
    expect(await session.getItems()).toEqual([said('committed')]);
    const stored = await getSession({ client: session.client, path: { session_id: sessionId } });
    expect(stored.data?.metadata?.[HISTORY_EPOCH_KEY]).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('objects of any plain prototype are the same content, for retries and suffixes', async () => {
    const { session } = fresh();
    const appended = said('canonical');
    appended.providerData = Object.assign(Object.create(null), { source: 'provider', another: 1 });
    await session.applyHistoryTransaction({
      operationId: 'canonical-append',
      transaction: { type: 'append_items', items: [appended] },
    });
    const [roundTripped] = await session.getItems();
    await session.applyHistoryTransaction({
      operationId: 'canonical-append',
      transaction: { type: 'append_items', items: [roundTripped] },
    });
    await session.applyHistoryTransaction({
      operationId: 'canonical-replace',
      transaction: { type: 'replace_suffix', expectedSuffix: [appended], replacement: [said('replaced')] },
    });
    expect(await session.getItems()).toEqual([said('replaced')]);
  });
});

describe('refusals, before anything is sent', () => {
  /** Expects `args` refused with `message`, no request sent and the history unchanged. */
  async function refused(args: unknown, message: string) {
    const { session, sent } = await seeded(said('start'));
    const before = sent.count;
    await expect(session.applyHistoryTransaction(args as SessionHistoryTransactionArgs)).rejects.toThrow(message);
    expect(sent.count).toBe(before);
    expect(await session.getItems()).toEqual([said('start')]);
    return session;
  }

  const unsupported = 'items contain invalid or unsupported data';

  test('malformed arguments', async () => {
    await refused({ operationId: '   ', transaction: { type: 'append_items', items: [] } }, 'operationId must be a non-empty string');
    await refused({ operationId: 'unknown', transaction: { type: 'unknown' } }, 'Unsupported session history transaction type');
    await refused({ operationId: 'missing', transaction: null }, 'transaction must be an object');
    await refused({ operationId: 'number', transaction: { type: 'append_items', items: [42] } }, unsupported);
  });

  test('dates, cycles, BigInts and sparse arrays', async () => {
    const withDate = said('date');
    withDate.providerData = { timestamp: new Date(0) };
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const withCycle = said('cycle');
    withCycle.providerData = cycle;
    const withBigInt = said('bigint');
    withBigInt.providerData = { value: 42n };
    for (const items of [[withDate], [withCycle], [withBigInt], new Array(1)]) {
      await refused({ operationId: 'unsupported', transaction: { type: 'append_items', items } }, unsupported);
    }
  });

  test('hidden or unexpected fields, and the operation id stays free', async () => {
    const hidden = said('hidden');
    Object.defineProperty(hidden, 'providerData', { enumerable: false, value: { hidden: true } });
    const session = await refused(
      { operationId: 'free', transaction: { type: 'append_items', items: [hidden] } },
      unsupported,
    );
    await refused(
      { operationId: 'free', transaction: { type: 'append_items', items: [said('x')], metadata: { attempt: 1 } } },
      'append transaction fields are invalid',
    );
    await refused(
      {
        operationId: 'free',
        transaction: { type: 'replace_suffix', expectedSuffix: [], replacement: [], metadata: {} },
      },
      'suffix transaction fields are invalid',
    );
    await session.applyHistoryTransaction({
      operationId: 'free',
      transaction: { type: 'append_items', items: [said('retry')] },
    });
    expect(await session.getItems()).toEqual([said('start'), said('retry')]);
  });

  test('typed arrays, binary data and proxies (the service keeps JSON)', async () => {
    const typed = said('typed');
    typed.providerData = { values: new Uint16Array([300]) };
    const binary = said('binary');
    binary.providerData = { bytes: new Uint8Array(new SharedArrayBuffer(2)) };
    for (const items of [[typed], [binary], new Proxy([said('proxied')], {})]) {
      await refused({ operationId: 'clone', transaction: { type: 'append_items', items } }, unsupported);
    }
  });

  test('more items than one write takes', async () => {
    const many = Array.from({ length: 1_001 }, (_, n) => said(`item ${n}`));
    await refused({ operationId: 'many', transaction: { type: 'append_items', items: many } }, 'at most 1000 items');
    await refused(
      { operationId: 'many', transaction: { type: 'replace_suffix', expectedSuffix: many.slice(1), replacement: [] } },
      'expects at most 999 items',
    );
    const { session, sent } = await seeded(said('start'));
    const before = sent.count;
    await expect(session.replaceHistoryWithCompaction(many)).rejects.toThrow('at most 1000 items');
    expect(sent.count).toBe(before);
  });

  test('a refusal never quotes the content', async () => {
    const secret = said('secret');
    secret.providerData = { secret: Symbol('api-key-secret') };
    const { session } = fresh();
    const error = await session
      .applyHistoryTransaction({ operationId: 'sensitive', transaction: { type: 'append_items', items: [secret] } })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe('Session history transaction items contain invalid or unsupported data.');
  });

  test('the arguments are read once, and a getter that throws is not quoted', async () => {
    const { session } = fresh();
    let reads = 0;
    const args = { transaction: { type: 'append_items', items: [said('once')] } } as SessionHistoryTransactionArgs;
    Object.defineProperty(args, 'operationId', {
      enumerable: true,
      get: () => (++reads === 1 ? 'read-once' : 'changed'),
    });
    await session.applyHistoryTransaction(args);
    expect(reads).toBe(1);
    reads = 0;
    await session.applyHistoryTransaction(args);
    expect(reads).toBe(1);
    expect(await session.getItems()).toEqual([said('once')]);

    const throwing = {} as SessionHistoryTransactionArgs;
    Object.defineProperty(throwing, 'operationId', {
      get: () => {
        throw new Error('api-key-secret');
      },
    });
    const error = await session.applyHistoryTransaction(throwing).catch((caught: unknown) => caught);
    expect((error as Error).message).toBe('Session history transaction arguments are invalid.');
  });
});

describe('errors and retries', () => {
  test('a refusal of the service is an AgentSessionsError with its status and code', async () => {
    const session = new AgentSessionsSession({ sessionId: 'x'.repeat(129), baseUrl: service.url });
    const error = await session.addItems([said('x')]).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AgentSessionsError);
    expect(error).toMatchObject({ status: 400, code: 'invalid_request' });
  });

  test('writes whose answers were lost are sent again with their key, and happen once', async () => {
    // Every write's first answer is lost on the way back, after the service acted on it.
    const lost = new Set<string>();
    const losing: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      const answer = await fetch(request.clone());
      const write = `${request.method} ${new URL(request.url).pathname} ${request.headers.get('idempotency-key')}`;
      if (request.method !== 'GET' && !lost.has(write)) {
        lost.add(write);
        throw new TypeError('fetch failed');
      }
      return answer;
    };
    const client = connect({
      baseUrl: service.url,
      fetch: losing,
      retry: { maxRetries: 3, backoffBaseMs: 1, backoffMaxMs: 5, maxRetryAfterMs: 1000 },
    });
    const session = new AgentSessionsSession({ sessionId: `agents-${crypto.randomUUID()}`, client });
    await session.addItems([said('one')]);
    await session.applyHistoryTransaction({
      operationId: 'lost-answer',
      transaction: { type: 'replace_suffix', expectedSuffix: [said('one')], replacement: [said('two')] },
    });
    await session.applyHistoryTransaction({
      operationId: 'lost-append',
      transaction: { type: 'append_items', items: [said('three')] },
    });
    // The append, the replacement's check that its id was no append's, the replacement, the
    // transaction's append: each answer lost once.
    expect(lost.size).toBe(4);
    expect(await session.getItems()).toEqual([said('two'), said('three')]);
  });
});
