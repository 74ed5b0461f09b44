/**
 * A client of the service whose requests retry when that is safe: appends, runs and
 * forks carry an `Idempotency-Key` kept across their retries, so nothing happens twice.
 */

import { createClient, createConfig, type Client } from './generated/client/index.js';

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

/** How an adapter is told its service: a client of {@link connect}, or where to connect. */
export interface ServiceOptions {
  /** The service, e.g. `http://localhost:8080`; or pass `client`. */
  baseUrl?: string;
  apiKey?: string;
  retry?: RetryPolicy;
  /** A client of {@link connect}, shared with other code; then `baseUrl` is not needed. */
  client?: Client;
}

/** The client `options` give, or a new one; `adapter` names who asks, for the error. */
export function clientOf(options: ServiceOptions, adapter: string): Client {
  if (options.client) return options.client;
  if (!options.baseUrl) throw new TypeError(`${adapter} needs a baseUrl or a client`);
  return connect({ baseUrl: options.baseUrl, apiKey: options.apiKey, retry: options.retry });
}

/** The POSTs that take an `Idempotency-Key`: appends, runs and forks. */
const KEYED = /\/v1\/sessions\/[^/]+\/(items|runs|fork)$/;
export const RETRYABLE = new Set([429, 500, 502, 503, 504]);

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


export function backoff(policy: RetryPolicy, retry: number): number {
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
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
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
