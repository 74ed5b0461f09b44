/**
 * `AgentSessionsSession`: the `Session` of the OpenAI Agents SDK for JavaScript
 * (`@openai/agents`) over this service. `run(agent, input, { session })` keeps its
 * history here: one item per SDK item, stored as the SDK gives it.
 *
 * History transactions (`applyHistoryTransaction`) are atomic and idempotent: the
 * operation id becomes the write's `Idempotency-Key`, so a retry, also after later
 * appends or from another process, changes nothing; a suffix replacement is one
 * `PUT …/items?after=` under `If-Match`, so it applies only to the history it checked.
 * A cleared session forgets its operation ids: the key also names the session's
 * `created_at` and a history epoch that `clearSession` renews in the session's metadata.
 *
 * Imports nothing of Node: it runs in a browser bundle as well (`crypto.subtle` and
 * `crypto.randomUUID` need a secure context there: https or localhost).
 */

import type {
  AgentInputItem,
  Session,
  SessionHistoryRewriteArgs,
  SessionHistoryRewriteAwareSession,
  SessionHistoryTransactionArgs,
  SessionHistoryTransactionAwareSession,
} from '@openai/agents-core';

import { answered, ok } from './errors.js';
import {
  clearItems,
  createSession,
  getSession,
  listItems,
  popLastItem,
  replaceItems,
  appendItems,
  updateSession,
  type Item,
  type Session as StoredSession,
} from './generated/index.js';
import {
  HistoryTransactionError,
  checkItems,
  checkTransactionArgs,
  sameItems,
  type CheckedTransaction,
} from './history_values.js';
import { clientOf, type ServiceOptions } from './connect.js';
import type { Client } from './generated/client/index.js';

/** The session's metadata key that `clearSession` renews. */
export const HISTORY_EPOCH_KEY = 'openai_agents.history_epoch';

/** A page of items: the service's most. */
const PAGE = 1000;

/** Suffix replacements that meet a concurrent write are checked again this often. */
const ATTEMPTS = 5;

export interface AgentSessionsSessionOptions extends ServiceOptions {
  /** The session id: letters, digits and `_.:@-`, up to 128. */
  sessionId: string;
}

export class AgentSessionsSession
  implements Session, SessionHistoryRewriteAwareSession, SessionHistoryTransactionAwareSession
{
  readonly sessionId: string;
  readonly client: Client;

  constructor(options: AgentSessionsSessionOptions) {
    this.sessionId = options.sessionId;
    this.client = clientOf(options, 'AgentSessionsSession');
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** The history oldest first; with `limit`, its newest `limit` items, oldest first. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit === undefined) return (await this.everything()).rows.map((row) => row.item as AgentInputItem);
    const newest: Item[] = [];
    let after: string | undefined;
    while (newest.length < limit) {
      const answer = await listItems({
        client: this.client,
        path: { session_id: this.sessionId },
        query: { limit: Math.min(PAGE, limit - newest.length), order: 'desc', after },
      });
      if (answer.response?.status === 404) break;
      const page = ok(answer);
      newest.push(...page.data);
      if (!page.has_more || page.data.length === 0) break;
      after = page.data[page.data.length - 1].id;
    }
    return newest.reverse().map((row) => row.item as AgentInputItem);
  }

  async addItems(items: AgentInputItem[]): Promise<void> {
    if (items.length === 0) return;
    const checked = checkItems(items);
    for (let start = 0; start < checked.length; start += PAGE) {
      ok(
        await appendItems({
          client: this.client,
          path: { session_id: this.sessionId },
          body: { items: checked.slice(start, start + PAGE) },
        }),
      );
    }
  }

  async popItem(): Promise<AgentInputItem | undefined> {
    try {
      const popped = ok(await popLastItem({ client: this.client, path: { session_id: this.sessionId } }));
      return popped.item as AgentInputItem;
    } catch (error) {
      // 404: no session, or nothing left in it.
      if (answered(error, 404)) return undefined;
      throw error;
    }
  }

  /** Removes every item and renews the history epoch: operation ids are forgotten. */
  async clearSession(): Promise<void> {
    try {
      ok(await clearItems({ client: this.client, path: { session_id: this.sessionId } }));
    } catch (error) {
      if (answered(error, 404)) return;
      throw error;
    }
    ok(
      await updateSession({
        client: this.client,
        path: { session_id: this.sessionId },
        body: { metadata: { [HISTORY_EPOCH_KEY]: crypto.randomUUID() } },
      }),
    );
  }

  /**
   * Compaction's replacement: the whole history becomes `items`, in one transaction (a
   * reader sees the old history or the new one, never a mix).
   */
  async replaceHistoryWithCompaction(items: AgentInputItem[]): Promise<void> {
    const checked = checkItems(items);
    ok(
      await replaceItems({
        client: this.client,
        path: { session_id: this.sessionId },
        body: { items: checked },
      }),
    );
  }

  /**
   * Replaces a function call the SDK rewrote: its first stored call keeps its place with
   * the replacement, later calls with the same `callId` go. One `PUT …/items?after=` of
   * what follows the first changed item, under `If-Match`: read again when another
   * write came between.
   */
  async applyHistoryMutations(args: SessionHistoryRewriteArgs): Promise<void> {
    if (args.mutations.length === 0) return;
    for (let attempt = 1; ; attempt++) {
      const { rows, revision } = await this.everything();
      let items = rows.map((row) => row.item as AgentInputItem);
      for (const mutation of args.mutations) {
        const [replacement] = checkItems([mutation.replacement]);
        let kept = false;
        items = items.flatMap((item) => {
          if (item.type !== 'function_call' || item.callId !== mutation.callId) return [item];
          if (kept) return [];
          kept = true;
          return [replacement];
        });
      }
      const unchanged = rows.findIndex((row, index) => !sameItems([row.item], [items[index]]));
      if (unchanged === -1 && items.length === rows.length) return;
      const first = unchanged === -1 ? rows.length : unchanged;
      const answer = await replaceItems({
        client: this.client,
        path: { session_id: this.sessionId },
        query: first === 0 ? undefined : { after: rows[first - 1].id },
        headers: revision ? { 'If-Match': revision } : undefined,
        body: { items: items.slice(first) },
      });
      if (answer.response?.status === 412 && attempt < ATTEMPTS) continue;
      ok(answer);
      return;
    }
  }

  async applyHistoryTransaction(args: SessionHistoryTransactionArgs): Promise<void> {
    const { operationId, transaction } = checkTransactionArgs(args);
    const stored = await this.ensured();
    const key = await operationKey(this.sessionId, stored, operationId);
    if (transaction.type === 'append_items') {
      await this.appendOnce(transaction.items, key);
    } else {
      await this.replaceSuffixOnce(transaction, key);
    }
  }

  private async appendOnce(items: AgentInputItem[], key: string): Promise<void> {
    const answer = await appendItems({
      client: this.client,
      path: { session_id: this.sessionId },
      headers: { 'Idempotency-Key': key },
      body: { items },
    });
    if (answer.response?.status === 422) throw reused();
    ok(answer);
  }

  private async replaceSuffixOnce(
    transaction: Extract<CheckedTransaction, { type: 'replace_suffix' }>,
    key: string,
  ): Promise<void> {
    const { expectedSuffix, replacement } = transaction;
    for (let attempt = 1; ; attempt++) {
      // The suffix and the item before it, with the revision they were read at.
      const tail = await listItems({
        client: this.client,
        path: { session_id: this.sessionId },
        query: { order: 'desc', limit: Math.min(PAGE, expectedSuffix.length + 1) },
      });
      const rows = ok(tail).data.slice().reverse();
      const revision = tail.response.headers.get('etag') ?? undefined;
      const suffix = rows.slice(rows.length - expectedSuffix.length);
      const matches =
        expectedSuffix.length < PAGE &&
        suffix.length === expectedSuffix.length &&
        sameItems(
          suffix.map((row) => row.item),
          expectedSuffix,
        );
      const before = rows.length > expectedSuffix.length ? rows[0].id : undefined;
      if (!matches) {
        if (await this.keyUsed(key, before)) return;
        throw new HistoryTransactionError(
          'Session history suffix no longer matches the transaction precondition.',
        );
      }
      const answer = await replaceItems({
        client: this.client,
        path: { session_id: this.sessionId },
        query: before === undefined ? undefined : { after: before },
        headers: { 'Idempotency-Key': key, ...(revision ? { 'If-Match': revision } : {}) },
        body: { items: replacement },
      });
      const status = answer.response?.status;
      if (status === 422) throw reused();
      // 412: a write came between the read and this one; read the suffix again.
      if (status === 412 && attempt < ATTEMPTS) continue;
      ok(answer);
      return;
    }
  }

  /**
   * Whether an earlier request used `key`: a replacement that cannot apply (its
   * `If-Match` names no revision the session can be at) is answered 422 when the key
   * was used, with another request, and 412 when it was not, which records nothing.
   */
  private async keyUsed(key: string, after: string | undefined): Promise<boolean> {
    const probe = await replaceItems({
      client: this.client,
      path: { session_id: this.sessionId },
      query: after === undefined ? undefined : { after },
      headers: { 'Idempotency-Key': key, 'If-Match': '"0"' },
      body: { items: [] },
    });
    if (probe.response?.status === 422) return true;
    if (probe.response?.status === 412) return false;
    ok(probe);
    throw new Error(`a replacement under If-Match "0" was answered ${probe.response?.status}`);
  }

  /** Every stored item, oldest first, and the revision before the first page was read. */
  private async everything(): Promise<{ rows: Item[]; revision: string | undefined }> {
    const rows: Item[] = [];
    let revision: string | undefined;
    let after: string | undefined;
    for (;;) {
      const answer = await listItems({
        client: this.client,
        path: { session_id: this.sessionId },
        query: { limit: PAGE, after },
      });
      if (answer.response?.status === 404) return { rows, revision };
      const page = ok(answer);
      revision ??= answer.response.headers.get('etag') ?? undefined;
      rows.push(...page.data);
      if (!page.has_more || page.data.length === 0) return { rows, revision };
      after = page.data[page.data.length - 1].id;
    }
  }

  /** The stored session, made first when there is none (its `created_at` names the keys). */
  private async ensured(): Promise<StoredSession> {
    const path = { session_id: this.sessionId };
    for (;;) {
      const found = await getSession({ client: this.client, path });
      if (found.response?.status !== 404) return ok(found);
      const made = await createSession({ client: this.client, body: { id: this.sessionId } });
      if (made.response?.status !== 409) return ok(made);
    }
  }
}

function reused(): HistoryTransactionError {
  return new HistoryTransactionError(
    'Session history operation was already applied with a different transaction.',
  );
}

/**
 * The `Idempotency-Key` of an operation on this life and epoch of the session: a
 * SHA-256, so that any operation id fits the key's printable 255 characters.
 */
async function operationKey(sessionId: string, stored: StoredSession, operationId: string): Promise<string> {
  const epoch = stored.metadata?.[HISTORY_EPOCH_KEY] ?? '';
  const text = JSON.stringify([sessionId, stored.created_at, epoch, operationId]);
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  const hex = Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, '0')).join('');
  return `history-operation:${hex}`;
}
