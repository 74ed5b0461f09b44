/**
 * `AgentSessionsSaver`: LangGraph.js's `BaseCheckpointSaver` over this service.
 * `graph.compile({ checkpointer: new AgentSessionsSaver({ baseUrl }) })` keeps a graph's
 * checkpoints here: a thread is a session (its `thread_id` the session id), a checkpoint
 * namespace a namespace of that session's checkpoints. The checkpoint, each channel's
 * value and each pending write are stored as the saver's serializer writes them, byte
 * for byte (base64 on the wire); metadata is kept as JSON, which listings filter on.
 * A channel's value is sent only with the checkpoint that gave it a new version.
 */

import {
  BaseCheckpointSaver,
  TASKS,
  WRITES_IDX_MAP,
  getCheckpointId,
  maxChannelVersion,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import type { RunnableConfig } from '@langchain/core/runnables';

import { clientOf, type ServiceOptions } from './connect.js';
import { answered, ok } from './errors.js';
import type { Client } from './generated/client/index.js';
import {
  deleteCheckpoints,
  getCheckpoint,
  listCheckpoints,
  listTenantCheckpoints,
  putCheckpoint,
  putCheckpointWrites,
  type Checkpoint as StoredCheckpoint,
  type TypedValue,
} from './generated/index.js';

/** A channel that had no value at its version: a blob of this type and no bytes. */
const EMPTY = 'empty';

/** A page of checkpoints: the service's most. */
const PAGE = 1000;

export interface AgentSessionsSaverOptions extends ServiceOptions {
  /** LangGraph's serializer by default. */
  serde?: SerializerProtocol;
}

export class AgentSessionsSaver extends BaseCheckpointSaver {
  readonly client: Client;

  constructor(options: AgentSessionsSaverOptions) {
    super(options.serde);
    this.client = clientOf(options, 'AgentSessionsSaver');
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    if (!config.configurable?.thread_id) return undefined;
    const session_id = thread(config);
    const namespace = checkpointNamespace(config);
    const checkpointId = getCheckpointId(config);
    try {
      let row: StoredCheckpoint | undefined;
      if (checkpointId) {
        row = ok(
          await getCheckpoint({
            client: this.client,
            path: { session_id, checkpoint_id: checkpointId },
            query: { namespace },
          }),
        );
      } else {
        const newest = ok(
          await listCheckpoints({ client: this.client, path: { session_id }, query: { namespace, limit: 1 } }),
        );
        row = newest.data[0];
      }
      return row && (await this.tuple(row));
    } catch (error) {
      if (answered(error, 404)) return undefined;
      throw error;
    }
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const threadId = config.configurable?.thread_id as string | undefined;
    const namespace = config.configurable?.checkpoint_ns as string | undefined;
    const filter = options.filter ?? {};
    let before = options.before ? getCheckpointId(options.before) || undefined : undefined;
    let left = options.limit;
    const only = getCheckpointId(config) || undefined;
    if (only !== undefined && threadId !== undefined) {
      // One checkpoint asked for by id: it, if it passes the other conditions.
      const tuple = await this.getTuple(config);
      const passes =
        tuple !== undefined &&
        (left === undefined || left > 0) &&
        (before === undefined || only < before) &&
        Object.entries(filter).every(([key, value]) => sameJson(tuple.metadata?.[key as keyof CheckpointMetadata], value));
      if (passes) yield tuple;
      return;
    }
    const metadata = Object.keys(filter).length > 0 ? JSON.stringify(filter) : undefined;
    while (left === undefined || left > 0) {
      const query = { namespace, before, metadata, limit: left === undefined ? PAGE : Math.min(PAGE, left) };
      let page;
      try {
        page = ok(
          threadId === undefined
            ? await listTenantCheckpoints({ client: this.client, query })
            : await listCheckpoints({ client: this.client, path: { session_id: String(threadId) }, query }),
        );
      } catch (error) {
        if (answered(error, 404)) return;
        throw error;
      }
      for (const row of page.data) {
        if (only !== undefined && row.id !== only) continue;
        if (left !== undefined) left -= 1;
        yield await this.tuple(row);
      }
      if (!page.has_more || page.data.length === 0) return;
      before = page.data[page.data.length - 1].id;
    }
  }

  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const session_id = thread(config);
    const namespace = checkpointNamespace(config);
    const { channel_values: values, ...rest } = checkpoint;
    const blobs = await Promise.all(
      Object.entries(newVersions).map(async ([channel, version]) => ({
        channel,
        version: String(version),
        ...(channel in values ? await this.encode(values[channel]) : { type: EMPTY, data: null }),
      })),
    );
    const versions: Record<string, string> = {};
    for (const [channel, version] of Object.entries(checkpoint.channel_versions)) {
      versions[channel] = String(version);
    }
    // The service keeps a blob only with its checkpoint's version of the channel.
    for (const blob of blobs) versions[blob.channel] ??= blob.version;
    ok(
      await putCheckpoint({
        client: this.client,
        path: { session_id, checkpoint_id: checkpoint.id },
        query: { namespace },
        body: {
          checkpoint: await this.encode({ ...rest, channel_values: {} }),
          parent_id: getCheckpointId(config) || null,
          metadata: metadata as Record<string, unknown>,
          channel_versions: versions,
          blobs,
        },
      }),
    );
    return checkpointConfig(session_id, namespace, checkpoint.id);
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ''): Promise<void> {
    const checkpointId = getCheckpointId(config);
    if (!checkpointId) throw new Error('putWrites needs the checkpoint_id of its checkpoint');
    const rows = await Promise.all(
      writes.map(async ([channel, value], idx) => ({
        idx: WRITES_IDX_MAP[channel] ?? idx,
        channel,
        ...(await this.encode(value)),
      })),
    );
    ok(
      await putCheckpointWrites({
        client: this.client,
        path: { session_id: thread(config), checkpoint_id: checkpointId },
        query: { namespace: checkpointNamespace(config) },
        body: { task_id: taskId, task_path: taskPath, writes: rows },
      }),
    );
  }

  /** Deletes the thread's checkpoints, their values and writes; the session stays. */
  async deleteThread(threadId: string): Promise<void> {
    try {
      ok(await deleteCheckpoints({ client: this.client, path: { session_id: threadId } }));
    } catch (error) {
      if (!answered(error, 404)) throw error;
    }
  }

  private async encode(value: unknown): Promise<TypedValue> {
    const [type, bytes] = await this.serde.dumpsTyped(value);
    return { type, data: toBase64(bytes) };
  }

  private decode(value: TypedValue): Promise<unknown> {
    return this.serde.loadsTyped(value.type, fromBase64(value.data ?? ''));
  }

  /**
   * A checkpoint of a format before version 4 kept the sends of a step as writes of its
   * parent; LangGraph reads them as the checkpoint's own tasks channel since.
   */
  private async migratePendingSends(checkpoint: Checkpoint, row: StoredCheckpoint): Promise<void> {
    const parent = await getCheckpoint({
      client: this.client,
      path: { session_id: row.session_id, checkpoint_id: row.parent_id as string },
      query: { namespace: row.namespace },
    });
    // A parent that is gone left no sends.
    const writes = parent.response?.status === 404 ? [] : ok(parent).writes;
    const sends = ordered(writes).filter((write) => write.channel === TASKS);
    checkpoint.channel_values[TASKS] = await Promise.all(sends.map((write) => this.decode(write)));
    const versions = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] =
      versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
  }

  private async tuple(row: StoredCheckpoint): Promise<CheckpointTuple> {
    const checkpoint = (await this.decode(row.checkpoint)) as Checkpoint;
    const values: Record<string, unknown> = {};
    for (const blob of row.blobs) {
      if (blob.type !== EMPTY) values[blob.channel] = await this.decode(blob);
    }
    checkpoint.channel_values = values;
    if (checkpoint.v < 4 && row.parent_id) await this.migratePendingSends(checkpoint, row);
    const pendingWrites: CheckpointPendingWrite[] = await Promise.all(
      ordered(row.writes).map(
        async (write) => [write.task_id, write.channel, await this.decode(write)] as CheckpointPendingWrite,
      ),
    );
    return {
      config: checkpointConfig(row.session_id, row.namespace, row.id),
      checkpoint,
      metadata: row.metadata as CheckpointMetadata,
      parentConfig: row.parent_id ? checkpointConfig(row.session_id, row.namespace, row.parent_id) : undefined,
      pendingWrites,
    };
  }
}

/** The order LangGraph applies a step's writes in: task path, task id, index. */
function ordered(writes: StoredCheckpoint['writes']): StoredCheckpoint['writes'] {
  return writes
    .slice()
    .sort((a, b) => compare(a.task_path ?? '', b.task_path ?? '') || compare(a.task_id, b.task_id) || a.idx - b.idx);
}

function thread(config: RunnableConfig): string {
  const threadId = config.configurable?.thread_id;
  if (threadId === undefined || threadId === null || threadId === '') {
    throw new Error('the config has no configurable.thread_id: a checkpoint belongs to a thread');
  }
  return String(threadId);
}

function checkpointNamespace(config: RunnableConfig): string {
  return String(config.configurable?.checkpoint_ns ?? '');
}

function checkpointConfig(threadId: string, namespace: string, checkpointId: string): RunnableConfig {
  return { configurable: { thread_id: threadId, checkpoint_ns: namespace, checkpoint_id: checkpointId } };
}

/** The service's metadata filter: equal as JSON, null also matching a missing member. */
function sameJson(stored: unknown, wanted: unknown): boolean {
  return JSON.stringify(stored ?? null) === JSON.stringify(wanted ?? null);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Base64 without Node's Buffer, so that the saver also runs in a browser. */
function toBase64(bytes: Uint8Array): string {
  let text = '';
  for (let start = 0; start < bytes.length; start += 0x8000) {
    text += String.fromCharCode(...bytes.subarray(start, start + 0x8000));
  }
  return btoa(text);
}

function fromBase64(data: string): Uint8Array {
  return Uint8Array.from(atob(data), (char) => char.charCodeAt(0));
}
