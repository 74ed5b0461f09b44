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
  canonical,
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
    if (limit !== undefined && limit <= 0) return [];
    const { rows } = await this.read(limit === undefined ? 'asc' : 'desc', limit);
    if (limit !== undefined) rows.reverse();
    return rows.map((row) => row.item as AgentInputItem);
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
    const checked = checkItems(fitting(items));
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
      const { rows, revision } = await this.read('asc');
      let items = rows.map((row) => row.item as AgentInputItem);
      for (const mutation of args.mutations) {
        if (mutation.type !== 'replace_function_call') continue;
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
        body: { items: fitting(items.slice(first)) },
      });
      if (answer.response?.status === 412 && attempt < ATTEMPTS) continue;
      ok(answer);
      return;
    }
  }

  async applyHistoryTransaction(args: SessionHistoryTransactionArgs): Promise<void> {
    const { operationId, transaction } = checkTransactionArgs(args);
    if (transaction.type === 'append_items') {
      fitting(transaction.items);
    } else {
      fitting(transaction.replacement);
      // The suffix is read with the item before it, in one page.
      if (transaction.expectedSuffix.length >= PAGE) {
        throw new HistoryTransactionError(`A suffix replacement expects at most ${PAGE - 1} items.`);
      }
    }
    const stored = await this.ensured();
    const key = await operationKey(this.sessionId, stored, operationId);
    if (transaction.type === 'append_items') {
      await this.appendOnce(transaction.items, key);
    } else {
      // An append under this operation id was another transaction.
      if (await this.keyUsed(key)) throw reused();
      // The replacement's key names its content too: a 422 for it means this very
      // replacement was made already (the If-Match it was made under is long gone).
      const exact = await operationKey(this.sessionId, stored, operationId, canonical(transaction));
      await this.replaceSuffixOnce(transaction, exact);
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
        suffix.length === expectedSuffix.length &&
        sameItems(
          suffix.map((row) => row.item),
          expectedSuffix,
        );
      const before = rows.length > expectedSuffix.length ? rows[0].id : undefined;
      if (!matches) {
        if (await this.keyUsed(key)) return;
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
      if (status === 422) return;
      // 412: a write came between the read and this one; read the suffix again.
      if (status === 412 && attempt < ATTEMPTS) continue;
      ok(answer);
      return;
    }
  }

  /**
   * Whether an earlier request used `key`: a replacement that cannot apply (its
   * `If-Match` names revision 0, and revisions start at 1) is answered 422 when the key
   * was used, with another request, and 412 when it was not, which records nothing.
   */
  private async keyUsed(key: string): Promise<boolean> {
    const probe = await replaceItems({
      client: this.client,
      path: { session_id: this.sessionId },
      headers: { 'Idempotency-Key': key, 'If-Match': '"0"' },
      body: { items: [] },
    });
    if (probe.response?.status === 422) return true;
    if (probe.response?.status === 412) return false;
    ok(probe);
    throw new Error(`a replacement under If-Match "0" was answered ${probe.response?.status}`);
  }

  /**
   * The items in `order` (up to `limit`), page by page, and the revision they are at. A
   * read of more than one page that a write crossed (another revision, a cursor a pop
   * took away, the session deleted) starts again, a few times; then it answers what the
   * last one read, as a plain listing would.
   */
  private async read(order: 'asc' | 'desc', limit?: number): Promise<{ rows: Item[]; revision?: string }> {
    for (let attempt = 1; ; attempt++) {
      const rows: Item[] = [];
      let revision: string | undefined;
      let after: string | undefined;
      let crossed = false;
      for (;;) {
        const want = limit === undefined ? PAGE : Math.min(PAGE, limit - rows.length);
        const answer = await listItems({
          client: this.client,
          path: { session_id: this.sessionId },
          query: { limit: want, order, after },
        });
        const status = answer.response?.status;
        if (after !== undefined && (status === 400 || status === 404)) {
          crossed = true;
          break;
        }
        if (status === 404) return { rows };
        const page = ok(answer);
        const etag = answer.response.headers.get('etag') ?? undefined;
        revision ??= etag;
        crossed ||= etag !== revision;
        rows.push(...page.data);
        if (!page.has_more || page.data.length === 0 || rows.length === limit) break;
        after = page.data[page.data.length - 1].id;
      }
      if (!crossed || attempt === ATTEMPTS) return { rows, revision };
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

/** `items`, when one write can take them all; a refusal, before anything is sent, if not. */
function fitting<T>(items: T[]): T[] {
  if (items.length > PAGE) {
    throw new HistoryTransactionError(
      `A session history write takes at most ${PAGE} items; this one has ${items.length}.`,
    );
  }
  return items;
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
async function operationKey(
  sessionId: string,
  stored: StoredSession,
  ...operation: string[]
): Promise<string> {
  const epoch = stored.metadata?.[HISTORY_EPOCH_KEY] ?? '';
  const text = JSON.stringify([sessionId, stored.created_at, epoch, ...operation]);
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  const hex = Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, '0')).join('');
  return `history-operation:${hex}`;
}
