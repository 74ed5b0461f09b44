"""LangGraph graphs on ``AgentSessionsSaver`` against the real service: a graph paused by
``interrupt()`` in one process resumes in another, and a run goes back to an earlier
checkpoint (time travel) and on from there."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from typing import Any, Callable

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from agent_sessions_client import AgentSessionsClient
from agent_sessions_client.langgraph import AgentSessionsSaver
from sessions_testkit.server import Service

# The graph of the interrupt test, built the same way in both processes.
GREETER = textwrap.dedent(
    """
    from typing_extensions import TypedDict
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    class Greeting(TypedDict, total=False):
        topic: str
        name: str
        text: str

    def ask(state: Greeting) -> Greeting:
        return {"name": interrupt({"question": "who is asking about " + state["topic"] + "?"})}

    def greet(state: Greeting) -> Greeting:
        return {"text": "Hello " + state["name"] + ", about " + state["topic"]}

    def build(saver):
        graph = StateGraph(Greeting)
        graph.add_node("ask", ask)
        graph.add_node("greet", greet)
        graph.add_edge(START, "ask")
        graph.add_edge("ask", "greet")
        graph.add_edge("greet", END)
        return graph.compile(checkpointer=saver)
    """
)


def _greeter() -> Callable[[AgentSessionsSaver], Any]:
    scope: dict[str, Any] = {}
    exec(GREETER, scope)
    return scope["build"]  # type: ignore[no-any-return]


def test_an_interrupted_graph_resumes_in_another_process(service: Service) -> None:
    thread = f"graph-{uuid.uuid4().hex}"
    first = GREETER + textwrap.dedent(
        f"""
        import json
        from agent_sessions_client.langgraph import AgentSessionsSaver
        saver = AgentSessionsSaver(base_url={service.url!r})
        graph = build(saver)
        config = {{"configurable": {{"thread_id": {thread!r}}}}}
        out = graph.invoke({{"topic": "checkpoints"}}, config)
        print(json.dumps([i.value for i in out["__interrupt__"]]))
        saver.close()
        """
    )
    paused = subprocess.run(
        [sys.executable, "-c", first], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(paused.stdout.strip().splitlines()[-1]) == [
        {"question": "who is asking about checkpoints?"}
    ]

    # This process never ran the graph: everything it resumes from is in the service.
    saver = AgentSessionsSaver(base_url=service.url)
    graph = _greeter()(saver)
    config: Any = {"configurable": {"thread_id": thread}}
    waiting = graph.get_state(config)
    assert waiting.next == ("ask",)
    assert waiting.values == {"topic": "checkpoints"}
    done = graph.invoke(Command(resume="Ada"), config)
    assert done["text"] == "Hello Ada, about checkpoints"
    assert graph.get_state(config).next == ()
    saver.close()


class Counter(TypedDict):
    steps: list[str]


async def test_time_travel_goes_on_from_an_earlier_checkpoint(
    client: AgentSessionsClient,
) -> None:
    def step(name: str) -> Any:
        def node(state: Counter) -> Counter:
            return {"steps": [*state["steps"], name]}

        return node

    builder = StateGraph(Counter)
    for name in ("a", "b", "c"):
        builder.add_node(name, step(name))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    saver = AgentSessionsSaver(client)
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": f"travel-{uuid.uuid4().hex}"}}

    assert (await graph.ainvoke({"steps": []}, config))["steps"] == ["a", "b", "c"]
    history = [s async for s in graph.aget_state_history(config)]
    # The input, then one checkpoint before each node and one at the end, newest first.
    assert [s.values.get("steps") for s in history] == [
        ["a", "b", "c"],
        ["a", "b"],
        ["a"],
        [],
        None,
    ]
    before_c = next(s for s in history if s.next == ("c",))
    # Going on from the checkpoint before `c` runs `c` again, on a new branch.
    again = await graph.ainvoke(None, before_c.config)
    assert again["steps"] == ["a", "b", "c"]
    # The new newest checkpoint descends from the one gone back to.
    ancestors = []
    state = await graph.aget_state(config)
    while state.parent_config is not None:
        ancestors.append(state.parent_config["configurable"]["checkpoint_id"])
        state = await graph.aget_state(state.parent_config)
    assert before_c.config["configurable"]["checkpoint_id"] in ancestors
    assert len([s async for s in graph.aget_state_history(config)]) > len(history)

    # Changing the state there (update_state) branches too, and the graph goes on from it.
    changed = await graph.aupdate_state(before_c.config, {"steps": ["a", "b", "x"]})
    assert (await graph.ainvoke(None, changed))["steps"] == ["a", "b", "x", "c"]
