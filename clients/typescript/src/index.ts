/**
 * agent-sessions for TypeScript. Every operation is generated from the service's
 * `openapi.yaml` (in `./generated`, re-exported here); this layer adds only what
 * generation cannot know:
 *
 * - {@link connect}: a client whose requests retry when that is safe, appends, runs and
 *   forks with an `Idempotency-Key` kept across the retries, so nothing happens twice;
 * - {@link followRun}: a run's events that go on after a broken connection or a replica
 *   that shuts down, from the last event seen (`Last-Event-ID`), each event once.
 */

import { createClient, createConfig, type Client } from './generated/client/index.js';
import type { StreamEvent } from './generated/core/serverSentEvents.gen.js';
import { runEvents } from './generated/sdk.gen.js';
import type {
  CompactionCreated,
  ItemCreated,
  MessageDelta,
  Run,
  RunStreamEvent,
} from './generated/types.gen.js';

export * from './generated/index.js';
export type { Client } from './generated/client/index.js';

/** How requests are retried: full-jitter exponential backoff, `Retry-After` obeyed. */
export interface RetryPolicy {
  /** Attempts after the first; 0 never retries. */
  maxRetries: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** A `Retry-After` longer than this is not waited for: the answer is returned. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxRetries: 3,
  backoffBaseMs: 250,
  backoffMaxMs: 8_000,
  maxRetryAfterMs: 60_000,
};

export interface ConnectOptions {
  /** The service, e.g. `http://localhost:8080`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer …` when the service has authentication on. */
  apiKey?: string;
  retry?: RetryPolicy;
  /** The fetch underneath the retries; `globalThis.fetch` by default. */
  fetch?: typeof fetch;
}

/** A client of one service, to pass as `client` to the generated functions. */
export function connect(options: ConnectOptions): Client {
  const headers: Record<string, string> = {};
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  return createClient(
    createConfig({
      baseUrl: options.baseUrl.replace(/\/+$/, ''),
      headers,
      fetch: retryingFetch(options.retry ?? DEFAULT_RETRY, options.fetch ?? globalThis.fetch),
    }),
  );
}

/** The POSTs that take an `Idempotency-Key`: appends, runs and forks. */
const KEYED = /\/v1\/sessions\/[^/]+\/(items|runs|fork)$/;
const RETRYABLE = new Set([429, 500, 502, 503, 504]);

/**
 * `fetch` with retries. A request is repeated after the service may have acted on it only
 * when that is harmless (a GET, a PATCH, a request with an `Idempotency-Key`); any other
 * (a pop, say) only when it certainly never arrived: a refused connection, or a 429,
 * which the service answers before doing anything.
 */
export function retryingFetch(policy: RetryPolicy, base: typeof fetch): typeof fetch {
  return async (input, init) => {
    let request = new Request(input, init);
    if (
      request.method === 'POST' &&
      KEYED.test(new URL(request.url).pathname) &&
      !request.headers.has('idempotency-key')
    ) {
      const headers = new Headers(request.headers);
      headers.set('idempotency-key', crypto.randomUUID());
      request = new Request(request, { headers });
    }
    const replaySafe =
      ['GET', 'HEAD', 'PATCH', 'PUT'].includes(request.method) ||
      request.headers.has('idempotency-key');
    for (let retry = 0; ; retry++) {
      let response: Response;
      try {
        response = await base(request.clone());
      } catch (error) {
        const again = replaySafe || refused(error);
        if (retry >= policy.maxRetries || !again || request.signal.aborted) throw error;
        await sleep(backoff(policy, retry), request.signal);
        continue;
      }
      const again = response.status === 429 || (replaySafe && RETRYABLE.has(response.status));
      if (retry >= policy.maxRetries || !again) return response;
      const after = retryAfterMs(response.headers.get('retry-after'));
      if (after !== undefined && after > policy.maxRetryAfterMs) return response;
      await response.body?.cancel();
      await sleep(after ?? backoff(policy, retry), request.signal);
    }
  };
}

/**
 * One event of a run, its data parsed: the schema gives each event's data as JSON text,
 * and this is what that text holds. `id` is the `Last-Event-ID` to go on after it.
 */
export type RunEvent =
  | { event: Extract<RunStreamEvent['event'], `run.${string}`>; id: string; data: Run }
  | { event: 'message.delta'; id: string; data: MessageDelta }
  | { event: 'item.created'; id: string; data: ItemCreated }
  | { event: 'compaction.created'; id: string; data: CompactionCreated };

/** After these, nothing follows until the client acts, or ever. */
const ENDINGS = new Set([
  'run.completed',
  'run.failed',
  'run.cancelled',
  'run.interrupted',
  'run.requires_action',
]);

export interface FollowOptions {
  /** Go on after this event; from the run's first event when absent. */
  lastEventId?: string;
  signal?: AbortSignal;
  /** Reconnections in a row that bring no event before giving up; 5 by default. */
  maxReconnects?: number;
}

/**
 * A run's events from its first (or after `lastEventId`) to the one that ends the
 * stream. A connection that breaks, or a stream that a replica ends as it shuts down,
 * is opened again with `Last-Event-ID`, through the service's balancer, so every event
 * comes once, up to `maxReconnects` in a row that bring nothing. An answer that is not
 * a stream (a 404, say) throws, and so does an abort of `signal`. `run.requires_action`
 * ends the stream: answer the run, then follow it again from the last event's id.
 */
export async function* followRun(
  client: Client,
  run: { sessionId: string; runId: string },
  options: FollowOptions = {},
): AsyncGenerator<RunEvent, void, undefined> {
  let lastEventId = options.lastEventId;
  let fruitless = 0;
  const limit = options.maxReconnects ?? 5;
  // Closes the open stream when the caller stops early, as well as on its own abort.
  const done = new AbortController();
  const signal = options.signal ? AbortSignal.any([done.signal, options.signal]) : done.signal;
  // The status of the last answer, which tells a stream that failed to open why.
  let status: number | undefined;
  const fetched = client.getConfig().fetch ?? globalThis.fetch;
  const watched: typeof fetch = async (input, init) => {
    const response = await fetched(input, init);
    status = response.status;
    return response;
  };
  try {
    for (;;) {
      signal.throwIfAborted();
      let current: StreamEvent | undefined;
      let broken: unknown;
      status = undefined;
      const { stream } = await runEvents({
        client,
        path: { session_id: run.sessionId, run_id: run.runId },
        headers: lastEventId === undefined ? undefined : { 'Last-Event-ID': lastEventId },
        signal,
        fetch: watched,
        // This loop reconnects, knowing when a stream that ended was not finished.
        sseMaxRetryAttempts: 1,
        onSseEvent: (event) => {
          current = event;
        },
        onSseError: (error) => {
          broken = error;
        },
      });
      let got = false;
      for await (const data of stream) {
        if (current?.event === undefined || current.id === undefined) continue;
        got = true;
        lastEventId = current.id;
        // The generated stream is typed with the frames' schema; its items are their
        // data, parsed.
        yield { event: current.event, id: current.id, data } as unknown as RunEvent;
        if (ENDINGS.has(current.event)) return;
      }
      signal.throwIfAborted();
      // fetch reports a lost connection as a TypeError; an answer that says to come back
      // (429, 5xx: a replica restarting behind the balancer) is followed again too.
      const passing =
        broken instanceof TypeError || (status !== undefined && RETRYABLE.has(status));
      if (broken !== undefined && !passing) throw broken;
      fruitless = got ? 0 : fruitless + 1;
      if (fruitless > limit) {
        throw new Error(`the run's event stream broke off ${fruitless} times in a row`, {
          cause: broken,
        });
      }
      if (fruitless > 0) await sleep(backoff(DEFAULT_RETRY, fruitless - 1), signal);
    }
  } finally {
    done.abort();
  }
}

function backoff(policy: RetryPolicy, retry: number): number {
  return Math.random() * Math.min(policy.backoffMaxMs, policy.backoffBaseMs * 2 ** retry);
}

function retryAfterMs(header: string | null): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** Whether fetch failed before the request left: the service never saw it. */
function refused(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string } } | undefined)?.cause;
  return cause?.code === 'ECONNREFUSED';
}

/** Waits `ms`, or rejects as soon as `signal` aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', stop);
      resolve();
    }, ms);
    const stop = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', stop, { once: true });
  });
}
