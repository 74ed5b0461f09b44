"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``,
pinned in requirements-test.txt) against ``AgentSessionsSaver`` and the real service:
every base and every extended capability must be detected and pass."""

from __future__ import annotations

from collections.abc import AsyncIterator

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from agent_sessions_client import AgentSessionsClient
from agent_sessions_client.langgraph import AgentSessionsSaver


async def test_every_capability_of_the_conformance_suite_passes(
    client: AgentSessionsClient,
) -> None:
    @checkpointer_test(name="AgentSessionsSaver")
    async def saver() -> AsyncIterator[AgentSessionsSaver]:
        yield AgentSessionsSaver(client)

    report = await validate(saver, progress=ProgressCallbacks.verbose())
    report.print_report()
    results = report.results
    assert {str(c.value) for c in ALL_CAPABILITIES} <= {str(k) for k in results}, results.keys()
    failed = {
        name: result.failures
        for name, result in results.items()
        if not (result.detected and result.passed)
    }
    assert not failed, failed
