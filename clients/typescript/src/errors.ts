/**
 * The errors the adapters throw: an answer of the service that is not a success, with
 * its problem+json, so that code can tell a missing session (404) from a stale revision
 * (412) or a reused key (422) by `status` and `code` alone.
 */

import type { Problem } from './generated/types.gen.js';

export class AgentSessionsError extends Error {
  override name = 'AgentSessionsError';

  constructor(
    /** The HTTP status of the answer. */
    readonly status: number,
    /** The problem's `code` (`session_not_found`, `revision_mismatch`, …). */
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** What a generated function answers. */
interface Answer<T> {
  data?: T;
  error?: unknown;
  response?: Response;
}

/**
 * The data of a successful answer; an {@link AgentSessionsError} for any other, and the
 * thrown error itself when no answer came.
 */
export function ok<T>(answer: Answer<T>): T {
  const { response, error } = answer;
  if (response === undefined) throw error;
  if (response.ok) return answer.data as T;
  const problem = (error ?? {}) as Partial<Problem>;
  throw new AgentSessionsError(
    response.status,
    problem.code ?? 'unknown',
    problem.detail ?? `the service answered ${response.status}`,
  );
}

/** Whether `error` is the service's answer with this status. */
export function answered(error: unknown, status: number): error is AgentSessionsError {
  return error instanceof AgentSessionsError && error.status === status;
}
