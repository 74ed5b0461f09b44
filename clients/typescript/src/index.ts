/**
 * agent-sessions for TypeScript. Every operation is generated from the service's
 * `openapi.yaml` (in `./generated`, re-exported here); this layer adds only what
 * generation cannot know:
 *
 * - {@link connect}: a client whose requests retry when that is safe, appends, runs and
 *   forks with an `Idempotency-Key` kept across the retries, so nothing happens twice;
 * - {@link followRun}: a run's events that go on after a broken connection or a replica
 *   that shuts down, from the last event seen (`Last-Event-ID`), each event once;
 *
 * and the framework adapters: {@link AgentSessionsSession} (the OpenAI Agents SDK's
 * `Session`) and {@link AgentSessionsSaver} (LangGraph's checkpoint saver).
 */

export * from './generated/index.js';
export type { Client } from './generated/client/index.js';
export {
  DEFAULT_RETRY,
  connect,
  retryingFetch,
  type ConnectOptions,
  type RetryPolicy,
  type ServiceOptions,
} from './connect.js';
export * from './follow.js';
export { AgentSessionsError } from './errors.js';
export * from './agents.js';
export * from './langgraph.js';
export { HistoryTransactionError } from './history_values.js';
