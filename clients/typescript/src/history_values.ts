/**
 * What a history transaction may carry, checked before anything is sent: JSON's values
 * in plain objects and arrays. The Agents SDK's in-memory session refuses the same inputs
 * (dates, BigInts, symbols, functions, cycles, sparse arrays, accessors, non-enumerable
 * or symbol keys, class instances, proxies), with the same messages, which never quote
 * the refused content. Binary data is refused too: the service stores JSON.
 */

import type { AgentInputItem } from '@openai/agents-core';

export class HistoryTransactionError extends Error {
  override name = 'HistoryTransactionError';
}

export type CheckedTransaction =
  | { type: 'append_items'; items: AgentInputItem[] }
  | { type: 'replace_suffix'; expectedSuffix: AgentInputItem[]; replacement: AgentInputItem[] };

const UNSUPPORTED = 'Session history transaction items contain invalid or unsupported data.';

/** The operation id and a plain copy of the transaction, or the refusal. */
export function checkTransactionArgs(args: unknown): {
  operationId: string;
  transaction: CheckedTransaction;
} {
  let operationId: unknown;
  let transaction: unknown;
  try {
    if (!args || typeof args !== 'object') throw new Error('no arguments');
    // Each field is read once: a getter that answers differently the second time must
    // not make the key and the write disagree.
    operationId = Reflect.get(args, 'operationId');
    transaction = Reflect.get(args, 'transaction');
  } catch {
    throw new HistoryTransactionError('Session history transaction arguments are invalid.');
  }
  if (typeof operationId !== 'string' || operationId.trim() === '') {
    throw new HistoryTransactionError(
      'Session history transaction operationId must be a non-empty string.',
    );
  }
  if (!transaction || typeof transaction !== 'object') {
    throw new HistoryTransactionError('Session history transaction must be an object.');
  }
  return { operationId, transaction: checkTransaction(transaction) };
}

function checkTransaction(transaction: object): CheckedTransaction {
  let record: Record<string, unknown>;
  try {
    // structuredClone refuses proxies and what cannot be copied at all.
    structuredClone(transaction);
    record = plain(transaction, new WeakSet()) as Record<string, unknown>;
  } catch {
    throw new HistoryTransactionError(UNSUPPORTED);
  }
  const fields = Object.keys(record).sort().join(',');
  if (record.type === 'append_items') {
    if (fields !== 'items,type' || !Array.isArray(record.items)) {
      throw new HistoryTransactionError('Session history append transaction fields are invalid.');
    }
    return { type: 'append_items', items: checkItems(record.items) };
  }
  if (record.type !== 'replace_suffix') {
    throw new HistoryTransactionError('Unsupported session history transaction type.');
  }
  if (
    fields !== 'expectedSuffix,replacement,type' ||
    !Array.isArray(record.expectedSuffix) ||
    !Array.isArray(record.replacement)
  ) {
    throw new HistoryTransactionError('Session history suffix transaction fields are invalid.');
  }
  return {
    type: 'replace_suffix',
    expectedSuffix: checkItems(record.expectedSuffix),
    replacement: checkItems(record.replacement),
  };
}

/** Items for an append outside a transaction: the same values, or a refusal. */
export function checkItems(items: unknown[]): AgentInputItem[] {
  return items.map((item) => {
    let copy: unknown;
    try {
      copy = plain(item, new WeakSet());
    } catch {
      throw new HistoryTransactionError(UNSUPPORTED);
    }
    if (!isItem(copy)) throw new HistoryTransactionError(UNSUPPORTED);
    return copy;
  });
}

/** An item names its kind: a message its `role`, anything else its `type`. */
function isItem(value: unknown): value is AgentInputItem {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return false;
  const { role, type } = value as { role?: unknown; type?: unknown };
  return typeof role === 'string' || typeof type === 'string';
}

/**
 * A copy of `value` made of JSON's values, its object keys sorted so that the same
 * content is the same text whatever order it was built in, and whatever prototype its
 * plain objects had.
 */
function plain(value: unknown, ancestors: WeakSet<object>): unknown {
  if (value === null || ['string', 'boolean', 'undefined'].includes(typeof value)) return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error('not a JSON number');
    return value;
  }
  if (typeof value !== 'object') throw new Error('not a JSON value');
  if (ancestors.has(value)) throw new Error('cyclic');
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      const keys = Reflect.ownKeys(value);
      if (keys.length !== value.length + 1) throw new Error('sparse or decorated array');
      return Array.from({ length: value.length }, (_, index) =>
        plain(dataProperty(value, String(index)), ancestors),
      );
    }
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) throw new Error('not plain');
    const keys = Reflect.ownKeys(value);
    if (keys.some((key) => typeof key !== 'string')) throw new Error('symbol key');
    const copy: Record<string, unknown> = {};
    for (const key of (keys as string[]).sort()) {
      const field = plain(dataProperty(value, key), ancestors);
      Object.defineProperty(copy, key, { value: field, enumerable: true, writable: true, configurable: true });
    }
    return copy;
  } finally {
    ancestors.delete(value);
  }
}

function dataProperty(value: object, key: string): unknown {
  const descriptor = Object.getOwnPropertyDescriptor(value, key);
  if (!descriptor?.enumerable || !('value' in descriptor)) throw new Error('not a data property');
  return descriptor.value;
}

/** Whether two item lists hold the same JSON. */
export function sameItems(left: readonly unknown[], right: readonly unknown[]): boolean {
  return canonical(left) === canonical(right);
}

/** JSON text with every object's keys sorted. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, field: unknown) =>
    field && typeof field === 'object' && !Array.isArray(field)
      ? Object.fromEntries(Object.entries(field).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : field,
  );
}
