/**
 * A run's events that go on after a broken connection or a replica that shuts down,
 * from the last event seen (`Last-Event-ID`), each event once.
 */

import type { Client } from './generated/client/index.js';
import type { StreamEvent } from './generated/core/serverSentEvents.gen.js';
import { runEvents } from './generated/sdk.gen.js';
import type {
  CompactionCreated,
  ItemCreated,
  MessageDelta,
  Run,
  RunStreamEvent,
} from './generated/types.gen.js';
import { DEFAULT_RETRY, RETRYABLE, backoff, sleep } from './connect.js';

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
