"""``AgentSessionsSaver``: LangGraph's ``BaseCheckpointSaver`` over this API.

``graph.compile(checkpointer=AgentSessionsSaver(client))`` keeps a graph's checkpoints in
the service: a LangGraph thread is a session (its ``thread_id`` the session id), each
checkpoint namespace a namespace of that session's checkpoints. Checkpoints, channel
values and pending writes are stored as LangGraph's own serializer writes them, byte for
byte; metadata is kept as JSON, which the listing filters on. Every saver call is one
request (listing: one per 1,000 checkpoints), on the client's pooled connections.

Needs the ``langgraph`` extra (``pip install "agent-sessions-client[langgraph]"``).
"""

from __future__ import annotations

import base64
import contextlib
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Optional, Tuple, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ._loop_thread import run_blocking
from ._owned_client import client_for
from .client import AgentSessionsClient
from .errors import NotFound
from .types import JSONObject

# A channel that had no value at a version: stored as a blob of this type and no bytes.
_EMPTY = "empty"


class AgentSessionsSaver(BaseCheckpointSaver[str]):
    """LangGraph checkpoints in agent-sessions, with the sync and the async methods.

    ``client`` is shared (and not closed here); without one, the saver makes its own from
    ``base_url`` and ``api_key`` and closes it in ``aclose()``/``close()``.
    ``copy_thread`` is a fork of the session, so its target must not exist yet;
    ``delete_thread`` deletes the session's checkpoints and keeps the session.
    """

    def __init__(
        self,
        client: Optional[AgentSessionsClient] = None,
        *,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        serde: Optional[SerializerProtocol] = None,
    ) -> None:
        super().__init__(serde=serde)
        self.client, self._owns_client = client_for(client, base_url=base_url, api_key=api_key)

    # --- async -------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        thread_id, namespace = _thread(config), _namespace(config)
        checkpoint_id = get_checkpoint_id(config)
        try:
            if checkpoint_id:
                row = await self.client.checkpoints.get(
                    thread_id, checkpoint_id, namespace=namespace
                )
            else:
                newest = await self.client.checkpoints.list(thread_id, namespace=namespace, limit=1)
                if not newest:
                    return None
                row = newest[0]
        except NotFound:
            return None
        return self._tuple(row)

    async def alist(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> AsyncIterator[CheckpointTuple]:
        thread_id = _thread(config) if config else None
        namespace = config["configurable"].get("checkpoint_ns") if config else None
        checkpoint_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        if checkpoint_id and limit is not None:
            # Only that checkpoint can match: the limit is applied to it below.
            limit = None
        try:
            rows = await self.client.checkpoints.list(
                thread_id,
                namespace=namespace,
                before=before_id,
                limit=limit,
                metadata=filter,
            )
        except NotFound:
            return
        for row in rows:
            if checkpoint_id and row["id"] != checkpoint_id:
                continue
            yield self._tuple(row)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, namespace = _thread(config), _namespace(config)
        stored = checkpoint.copy()
        values: dict[str, Any] = stored.pop("channel_values", {})  # type: ignore[misc]
        blobs = [
            {"channel": channel, "version": str(version), **self._typed(values, channel)}
            for channel, version in new_versions.items()
        ]
        versions = {channel: str(v) for channel, v in checkpoint["channel_versions"].items()}
        # The service keeps a blob only with its checkpoint's version of the channel.
        for blob in blobs:
            versions.setdefault(blob["channel"], blob["version"])
        await self.client.checkpoints.put(
            thread_id,
            checkpoint["id"],
            _encode(self.serde.dumps_typed(stored)),
            namespace=namespace,
            parent_id=get_checkpoint_id(config),
            metadata=get_checkpoint_metadata(config, metadata),
            channel_versions=versions,
            blobs=blobs,
        )
        return _config(thread_id, namespace, checkpoint["id"])

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[Tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            raise ValueError("put_writes needs the checkpoint_id of its checkpoint")
        rows = [
            {"idx": WRITES_IDX_MAP.get(channel, idx), "channel": channel, **_encode(typed)}
            for idx, (channel, value) in enumerate(writes)
            for typed in (self.serde.dumps_typed(value),)
        ]
        await self.client.checkpoints.put_writes(
            _thread(config),
            checkpoint_id,
            task_id,
            rows,
            namespace=_namespace(config),
            task_path=task_path,
        )

    async def adelete_thread(self, thread_id: str) -> None:
        with contextlib.suppress(NotFound):
            await self.client.checkpoints.delete(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            await self.client.checkpoints.delete_runs([str(r) for r in run_ids])

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        with contextlib.suppress(NotFound):
            await self.client.sessions.fork(source_thread_id, id=target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        keep = {"keep_latest": "latest", "delete": "none"}.get(strategy)
        if keep is None:
            raise ValueError(f"unknown prune strategy {strategy!r}: keep_latest or delete")
        if thread_ids:
            await self.client.checkpoints.prune(list(thread_ids), keep=keep)

    async def aclose(self) -> None:
        if self._owns_client:
            await self.client.aclose()

    # --- sync: the same calls, made on a background loop ---------------------------------

    def get_tuple(self, config: RunnableConfig) -> Optional[CheckpointTuple]:
        return run_blocking(self.aget_tuple(config))

    def list(
        self,
        config: Optional[RunnableConfig],
        *,
        filter: Optional[dict[str, Any]] = None,
        before: Optional[RunnableConfig] = None,
        limit: Optional[int] = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            listed = self.alist(config, filter=filter, before=before, limit=limit)
            return [row async for row in listed]

        return iter(run_blocking(collect()))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return run_blocking(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[Tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        run_blocking(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        run_blocking(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        run_blocking(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        run_blocking(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        run_blocking(self.aprune(thread_ids, strategy=strategy))

    def close(self) -> None:
        run_blocking(self.aclose())

    # --- versions and rows ---------------------------------------------------------------

    def get_next_version(self, current: Optional[str], channel: None) -> str:
        """Versions that sort as strings: the step, zero-padded, then a random tail."""
        if current is None:
            step = 0
        elif isinstance(current, int):
            step = current
        else:
            step = int(str(current).split(".")[0])
        return f"{step + 1:032}.{random.random():016}"

    def _typed(self, values: dict[str, Any], channel: str) -> dict[str, Any]:
        if channel not in values:
            return {"type": _EMPTY, "data": None}
        return _encode(self.serde.dumps_typed(values[channel]))

    def _tuple(self, row: JSONObject) -> CheckpointTuple:
        thread_id, namespace = str(row["session_id"]), str(row["namespace"])
        checkpoint = cast(Checkpoint, self.serde.loads_typed(_decode(row["checkpoint"])))
        checkpoint["channel_values"] = {
            blob["channel"]: self.serde.loads_typed(_decode(blob))
            for blob in row["blobs"]
            if blob["type"] != _EMPTY
        }
        # The order LangGraph applies a step's writes in: task path, task id, index.
        writes = sorted(row["writes"], key=lambda w: (w["task_path"], w["task_id"], w["idx"]))
        pending: list[PendingWrite] = [
            (w["task_id"], w["channel"], self.serde.loads_typed(_decode(w))) for w in writes
        ]
        parent = row.get("parent_id")
        return CheckpointTuple(
            config=_config(thread_id, namespace, str(row["id"])),
            checkpoint=checkpoint,
            metadata=cast(CheckpointMetadata, row["metadata"]),
            parent_config=_config(thread_id, namespace, parent) if parent else None,
            pending_writes=pending,
        )


def _thread(config: RunnableConfig) -> str:
    return str(config["configurable"]["thread_id"])


def _namespace(config: RunnableConfig) -> str:
    return str(config["configurable"].get("checkpoint_ns") or "")


def _config(thread_id: str, namespace: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": namespace,
            "checkpoint_id": checkpoint_id,
        }
    }


def _encode(typed: Tuple[str, bytes]) -> dict[str, Any]:
    return {"type": typed[0], "data": base64.b64encode(typed[1]).decode("ascii")}


def _decode(value: JSONObject) -> Tuple[str, bytes]:
    return str(value["type"]), base64.b64decode(value.get("data") or "")


__all__ = ["AgentSessionsSaver"]
