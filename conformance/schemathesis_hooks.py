"""Schemathesis hooks of the conformance stage (loaded through conformance/schemathesis.toml).

No check is disabled. `filter_failure` drops a failure only in the cases listed there,
where the checker is demonstrably wrong about this API: what it flags is what the API
contract (README.md and docs/) prescribes, and the OpenAPI document cannot say so in advance,
because it depends on data on the server or on the effect of other requests, or on a
relation between parameters that OpenAPI 3.1 cannot express. Each rule matches the
operation, the status, the problem `code` and, where that is not enough, the exact
`detail` or the request that made the difference, so every other failure of the same kind
still fails the run, and a change of these answers stops the rule from matching (and
fails the run) instead of being hidden. Schemathesis reports the number of dropped
failures ("Filtered: N (dropped by `filter_failure`)"); this module prints them by rule
when the run ends. The counts include the retries Schemathesis makes while shrinking.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import re
import sys
from typing import Any

import schemathesis

# Checks, by the code of the failure they report.
SERVER_ERROR = "ST101"  # not_a_server_error: a 5xx answer
REJECTED_POSITIVE = "ST202"  # positive_data_acceptance: a schema-valid request was refused
DELETED_STILL_THERE = "ST301"  # use_after_free: a read succeeded after a DELETE
CREATED_NOT_FOUND = "ST302"  # ensure_resource_availability: 404 right after a POST

LIST_OPERATIONS = {
    "GET /v1/sessions",
    "GET /v1/sessions/{session_id}/items",
    "GET /v1/agents",
    "GET /v1/sessions/{session_id}/runs",
    "GET /v1/sessions/{session_id}/compactions",
    "GET /v1/api_keys",
}
# The checkpoint writes, whose blobs must be of the versions the body names.
CHECKPOINT_WRITES = {
    "PUT /v1/sessions/{session_id}/checkpoints/{checkpoint_id}",
}
# The checkpoint listings, which filter by a JSON object given as a query parameter.
CHECKPOINT_LISTS = {
    "GET /v1/sessions/{session_id}/checkpoints",
    "GET /v1/checkpoints",
}
# The OpenAI lists, whose cursor must name an item of the list too.
OPENAI_LIST_OPERATIONS = {
    "GET /v1/conversations/{conversation_id}/items": "in this conversation",
    "GET /v1/responses/{response_id}/input_items": "in this response's input",
}
# The operations that take an agent configuration, in the body or inline as `agent`.
AGENT_OPERATIONS = {
    "POST /v1/agents": "",
    "PATCH /v1/agents/{agent_id}": "",
    "POST /v1/sessions/{session_id}/runs": "agent.",
}
# Where a webhook sits in an agent's configuration (`prefix` before it) or on a run.
WEBHOOK_FIELD = r"({prefix}tools\[\d+\]\.webhook|{prefix}webhook|webhook)"
# An MCP server on a host not allowed, on an agent, inline, or in a response's `tools`.
MCP_HOST = (
    r"{prefix}tools\[\d+\]\.server_url: MCP server host `.*` is not allowed; "
    r"the operator lists the hosts the service may call in TOOL_WEBHOOK_ALLOWED_HOSTS"
)
MCP_URL = r"tools\[\d+\]\.server_url: not a URL: [^\n]*"
CREATE_RESPONSE = "POST /v1/responses"
# The OpenAI operations that take input items, which may be compactions.
OPENAI_INPUT_OPERATIONS = {
    CREATE_RESPONSE,
    "POST /v1/responses/compact",
    "POST /v1/conversations",
    "POST /v1/conversations/{conversation_id}/items",
}
ITEM_OPERATIONS = {
    "GET /v1/sessions/{session_id}/items/{item_id}",
    "DELETE /v1/sessions/{session_id}/items/{item_id}",
}
APPEND = "POST /v1/sessions/{session_id}/items"
POP = "DELETE /v1/sessions/{session_id}/items/last"
DELETE_SESSION = "DELETE /v1/sessions/{session_id}"
CLEAR = "DELETE /v1/sessions/{session_id}/items"
PUT_CHECKPOINT = "PUT /v1/sessions/{session_id}/checkpoints/{checkpoint_id}"
DELETE_CHECKPOINTS = "DELETE /v1/sessions/{session_id}/checkpoints"
LIST_CHECKPOINTS = "GET /v1/sessions/{session_id}/checkpoints"
GET_CHECKPOINT = "GET /v1/sessions/{session_id}/checkpoints/{checkpoint_id}"
CREATE_SESSION = "POST /v1/sessions"
UPDATE_SESSION = "PATCH /v1/sessions/{session_id}"
CREATE_RUN = "POST /v1/sessions/{session_id}/runs"
COMPACT = "POST /v1/sessions/{session_id}/compact"
CHAT = "POST /v1/chat"

# What the checks cannot see, recorded by `after_call`:
REPLAYED_ITEMS: set[tuple[str, str]] = set()  # (session, item) named by replayed appends
POPPED_ITEMS: set[tuple[str, str]] = set()  # (session, item) removed by a pop
DELETED_SESSIONS: set[str] = set()
RECREATED_SESSIONS: set[str] = set()  # deleted, then created again by an append
SESSION_AGENTS: dict[str, Any] = {}  # each session's `agent_id`, as last answered
# When (in requests sent) items were appended, and sessions deleted or cleared.
CLOCK = iter(range(1, 1 << 62))
APPENDED_AT: dict[tuple[str, str], int] = {}
DELETED_AT: dict[str, int] = {}
CLEARED_AT: dict[str, int] = {}
CHECKPOINTED_AT: dict[tuple[str, str, str], int] = {}  # (session, namespace, id)
CHECKPOINTS_DELETED_AT: dict[str, int] = {}

DROPPED: collections.Counter[str] = collections.Counter()


@atexit.register
def _report() -> None:
    for reason, count in sorted(DROPPED.items()):
        print(f"schemathesis_hooks: dropped {count:4} x {reason}", file=sys.stderr)


def _drop(reason: str) -> bool:
    DROPPED[reason] += 1
    return False


def _json(content: bytes | None) -> Any:
    try:
        return json.loads(content or b"")
    except ValueError:
        return None


def _problem(response: Any) -> tuple[str, str]:
    """The error's code and detail: of a problem document, or of an OpenAI error (the
    `/v1/conversations`, `/v1/responses` and `/v1/models` routes), whose message is the
    detail."""
    body = _json(response.content)
    if not isinstance(body, dict):
        return "", ""
    if isinstance(body.get("error"), dict):
        error = body["error"]
        return str(error.get("code", "")), str(error.get("message", ""))
    return str(body.get("code", "")), str(body.get("detail", ""))


# With authentication on (the Postgres pass of scripts/conformance.sh) every request
# carries a key: the admin key on /v1/api_keys, the conformance tenant's key on the
# other /v1 routes. A generated DELETE never revokes the tenant's own key.
ADMIN_KEY = os.environ.get("CONFORMANCE_ADMIN_KEY")
TENANT_KEY = os.environ.get("CONFORMANCE_TENANT_KEY")
TENANT_KEY_ID = os.environ.get("CONFORMANCE_TENANT_KEY_ID")


@schemathesis.hook
def before_call(ctx: Any, case: Any, kwargs: dict[str, Any]) -> None:
    path = case.operation.path
    if not (ADMIN_KEY and TENANT_KEY) or not path.startswith("/v1/"):
        return
    if path.startswith("/v1/api_keys"):
        key = ADMIN_KEY
        if (case.path_parameters or {}).get("key_id") == TENANT_KEY_ID:
            case.path_parameters["key_id"] = "00000000-0000-0000-0000-000000000000"
    else:
        key = TENANT_KEY
    if case.headers is None:
        case.headers = {}
    case.headers["Authorization"] = f"Bearer {key}"


@schemathesis.hook
def after_call(ctx: Any, case: Any, response: Any) -> None:
    label = case.operation.label
    status = response.status_code
    session_id = str((case.path_parameters or {}).get("session_id"))
    now = next(CLOCK)
    if label in (CREATE_SESSION, UPDATE_SESSION) and status in (200, 201):
        session = _json(response.content)
        if isinstance(session, dict):
            SESSION_AGENTS[str(session.get("id"))] = session.get("agent_id")
    if label == CLEAR and status == 204:
        CLEARED_AT[session_id] = now
    elif label == DELETE_CHECKPOINTS and status == 204:
        CHECKPOINTS_DELETED_AT[session_id] = now
    elif label == PUT_CHECKPOINT and status == 200:
        namespace = str((case.query or {}).get("namespace", ""))
        checkpoint_id = str((case.path_parameters or {}).get("checkpoint_id"))
        CHECKPOINTED_AT[(session_id, namespace, checkpoint_id)] = now
    elif label == POP and status == 200:
        popped = _json(response.content)
        if isinstance(popped, dict) and "id" in popped:
            POPPED_ITEMS.add((session_id, str(popped["id"])))
    elif label == DELETE_SESSION and status == 204:
        DELETED_SESSIONS.add(session_id)
        DELETED_AT[session_id] = now
        RECREATED_SESSIONS.discard(session_id)
    elif label == APPEND and status == 201:
        body = _json(response.content)
        ids = [
            str(item["id"])
            for item in (body.get("data", []) if isinstance(body, dict) else [])
            if isinstance(item, dict) and "id" in item
        ]
        replayed = [v.lower() for v in response.headers.get("idempotent-replayed", [])]
        if replayed == ["true"]:
            # A retry with a known Idempotency-Key and the same body gets the *first*
            # response, with those of its items that still exist, and appends nothing
            # (docs/api.md, "Retention"). Schemathesis draws keys from a small space, so
            # it replays earlier appends, whose items may be gone by now.
            REPLAYED_ITEMS.update((session_id, item_id) for item_id in ids)
            return
        for item_id in ids:
            APPENDED_AT[(session_id, item_id)] = now
        # An append creates its session when there is none (README.md, "A walk through
        # the API").
        if session_id in DELETED_SESSIONS:
            RECREATED_SESSIONS.add(session_id)


def _appended_since(session_id: str, item_ids: list[str], moment: int) -> bool:
    """Whether every one of these items was appended (not replayed) after `moment`."""
    return all(APPENDED_AT.get((session_id, item_id), 0) > moment for item_id in item_ids)


def _checkpointed_since(session_id: str, response: Any) -> bool:
    """Whether every checkpoint answered (one, or a page of them) was put after the
    session's checkpoints were last deleted."""
    body = _json(response.content)
    if not isinstance(body, dict):
        return False
    rows = body["data"] if isinstance(body.get("data"), list) else [body]
    deleted = CHECKPOINTS_DELETED_AT.get(session_id, 0)
    return all(
        isinstance(row, dict)
        and CHECKPOINTED_AT.get((session_id, str(row.get("namespace")), str(row.get("id"))), 0)
        > deleted
        for row in rows
    )


def _listed_ids(response: Any) -> list[str]:
    body = _json(response.content)
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        return ["?"]  # not a page: never "appended since"
    return [str(row.get("id")) if isinstance(row, dict) else "?" for row in body["data"]]


@schemathesis.hook
def filter_failure(ctx: Any, failure: Any, case: Any, response: Any) -> bool:
    """False drops `failure`; True keeps it."""
    label = case.operation.label
    status = response.status_code
    code, detail = _problem(response)
    query = case.query or {}
    path = case.path_parameters or {}
    session_id = str(path.get("session_id"))
    item = (session_id, str(path.get("item_id")))

    if failure.code == REJECTED_POSITIVE:
        # 1. A reused Idempotency-Key. The key is valid, but Schemathesis sent it before
        #    with another body; the contract answers 422 `idempotency_key_reused`. That
        #    depends on earlier requests, so no schema can rule it out.
        if status == 422 and code == "idempotency_key_reused":
            return _drop(f"ST202 {label} 422 idempotency_key_reused")
        # 1b. A well-formed If-Match that names another revision, or a session that does
        #     not exist: the contract answers 412 `revision_mismatch`. Whether it holds
        #     depends on the session's writes so far, which no schema can say.
        if status == 412 and code == "revision_mismatch":
            return _drop(f"ST202 {label} 412 revision_mismatch")
        # 1c. A user or app state delta on a session without that owner: the contract
        #     answers 400 naming the field. Whether the session has one is its state.
        if status == 400 and detail.split(":")[0] in ("user_state_delta", "app_state_delta"):
            return _drop(f"ST202 {label} 400 owner delta on a session without the owner")
        # 1d. A write naming another app or user than the session has: the contract
        #     answers 409 `owner_mismatch`. A session takes its owners from earlier
        #     writes, which no schema can know.
        if status == 409 and code == "owner_mismatch":
            return _drop(f"ST202 {label} 409 owner_mismatch")
        if label in CHECKPOINT_WRITES and status == 400 and code == "invalid_request":
            # 1e. A blob of a channel at a version the checkpoint's `channel_versions`
            #     does not name (a relation between two fields of the body), or a
            #     checkpoint without its bytes (`data` may be null on blobs and writes,
            #     which share the schema, but not on the checkpoint itself).
            if re.fullmatch(r"blobs\[\d+\]: channel `.*` at version `.*` is not in this checkpoint's channel_versions", detail, re.S):
                return _drop(f"ST202 {label} 400 blob outside channel_versions")
            if detail == "checkpoint.data: is required":
                return _drop(f"ST202 {label} 400 checkpoint without data")
        # 1f. `metadata` on a checkpoint listing is a JSON object in a query parameter:
        #     the document can say only `string` (its generator does not take a
        #     parameter's `content`), so text that is no JSON object is 400 naming it.
        if (
            label in CHECKPOINT_LISTS
            and status == 400
            and detail == "metadata: must be a JSON object"
            and "metadata" in query
        ):
            return _drop(f"ST202 {label} 400 metadata that is no JSON object")
        if label in LIST_OPERATIONS and status == 400 and code == "invalid_request":
            # 2. `after` and `before` together: each is valid, together they are 400 (a
            #    page has one anchor). OpenAPI 3.1 cannot say that two parameters
            #    exclude each other.
            if (
                "after" in query
                and "before" in query
                and detail.startswith("before: cannot be combined with `after`")
            ):
                return _drop(f"ST202 {label} 400 after+before")
            # 3. A cursor that names no row of the listing: a cursor must be the id of a
            #    row, which only the data decides; Schemathesis sends arbitrary strings.
            for cursor in ("after", "before"):
                if cursor in query and detail == (
                    f"{cursor}: no row with id `{query[cursor]}` in this listing"
                ):
                    return _drop(f"ST202 {label} 400 unknown cursor")

        if label in AGENT_OPERATIONS and status == 400:
            prefix = AGENT_OPERATIONS[label]
            # 4. The context's fields depend on each other in ways the schema does not
            #    say: `compact` needs `compact_threshold_tokens` or `max_input_tokens`,
            #    and the compaction fields apply only with `compact`.
            if code == "invalid_request" and (
                detail.startswith(f"{prefix}context.compact_threshold_tokens: strategy")
                or detail.endswith("applies only with strategy `compact`")
            ):
                return _drop(f"ST202 {label} 400 context fields that depend on the strategy")
            # 5. A webhook on a host the operator has not listed in
            #    TOOL_WEBHOOK_ALLOWED_HOSTS: the contract refuses it with 400 wherever an
            #    agent is given. Which hosts are allowed is configuration, not schema.
            #    The same for a completion webhook, on an agent, inline or on the run.
            #    An MCP server's `server_url` is held to the same list.
            webhook = WEBHOOK_FIELD.format(prefix=re.escape(prefix))
            if code == "invalid_request" and (
                re.fullmatch(
                    webhook + r"\.url: webhook host `.*` is not allowed; "
                    r"the operator lists the hosts (tools|the service) may call in "
                    r"TOOL_WEBHOOK_ALLOWED_HOSTS",
                    detail,
                )
                or re.fullmatch(MCP_HOST.format(prefix=re.escape(prefix)), detail)
            ):
                return _drop(f"ST202 {label} 400 webhook host not allowed")
            # 6. A webhook URL that the URL parser refuses (an invalid international
            #    domain name, a port over 65535, a host that ends in a number but is no
            #    IPv4 address, ...). The schema's pattern asks for `http(s)://` and a host;
            #    the rest of the WHATWG URL rules has no JSON Schema form.
            if code == "invalid_request" and (
                re.fullmatch(webhook + r"\.url: not a URL: [^\n]*", detail)
                or re.fullmatch(re.escape(prefix) + MCP_URL, detail)
            ):
                return _drop(f"ST202 {label} 400 webhook url not a URL")
            # 6b. `require_approval` on a tool without a webhook: only calls the service
            #    makes wait for a person; the client runs the others. That one field goes
            #    with another's presence is not said by the schema.
            if code == "invalid_request" and re.fullmatch(
                re.escape(prefix) + r"tools\[\d+\]\.require_approval: applies only to a "
                r"tool with a webhook: the client runs the others",
                detail,
            ):
                return _drop(f"ST202 {label} 400 require_approval without a webhook")
            # 7. Two tools of one name: the model calls a tool by its name, so names are
            #    unique within an agent. JSON Schema's `uniqueItems` compares whole items
            #    and cannot say that one property of the items is unique.
            if code == "invalid_request" and re.fullmatch(
                re.escape(prefix)
                + r"tools\[\d+\]\.(name: a tool named|server_label: an MCP server labelled) "
                r"`[^`]*` is listed twice",
                detail,
            ):
                return _drop(f"ST202 {label} 400 tool name listed twice")

        # 3b. The same for the OpenAI lists, whose `after` must name an item of the list.
        if label in OPENAI_LIST_OPERATIONS and status == 400 and code == "invalid_request":
            where = OPENAI_LIST_OPERATIONS[label]
            if "after" in query and detail == f"after: no item with id `{query['after']}` {where}":
                return _drop(f"ST202 {label} 400 unknown cursor")

        # 7e. A chat request whose newest message the service cannot take: what is asked
        #    depends on that message's role, its parts' types and texts, and, for an
        #    assistant message, on the paused run its id names; and a `messageId` with a
        #    newest user message is an edit. JSON Schema cannot single out an array's
        #    last item, nor tie one field to another's value.
        if label == CHAT and status == 400 and code == "invalid_request":
            body = case.body if isinstance(case.body, dict) else {}
            newest = len(body.get("messages") or []) - 1
            if re.match(rf"messages\[{newest}\]\.(id|role|parts)[:\[.]", detail) or (
                detail.startswith("messageId: editing a sent message is not supported")
            ):
                return _drop(f"ST202 {label} 400 the newest message cannot be taken")

        # 7b. Two function tools of one name (or MCP servers of one label) in a
        #    response's `tools`, as in rule 7; an MCP server's URL on a host not allowed
        #    or not a URL, as in rules 5 and 6.
        if label == CREATE_RESPONSE and status == 400 and code == "invalid_request":
            if re.fullmatch(
                r"tools\[\d+\]\.(name: a tool named|server_label: an MCP server labelled) "
                r"`[^`]*` is listed twice",
                detail,
            ):
                return _drop(f"ST202 {label} 400 tool name listed twice")
            if re.fullmatch(MCP_HOST.format(prefix=""), detail):
                return _drop(f"ST202 {label} 400 webhook host not allowed")
            if re.fullmatch(MCP_URL, detail):
                return _drop(f"ST202 {label} 400 webhook url not a URL")

        # 7c. A response to answer from (or compact) that is not there:
        #    `previous_response_id` must name a stored, completed response of the tenant,
        #    which only the data decides.
        if (
            label in (CREATE_RESPONSE, "POST /v1/responses/compact")
            and status == 400
            and code == "previous_response_not_found"
            and isinstance(case.body, dict)
            and detail.startswith(f"previous response `{case.body.get('previous_response_id')}` ")
        ):
            return _drop(f"ST202 {label} 400 previous_response_not_found")

        # 7f. A `function_call_output` whose call is in neither the input nor the
        #    conversation or chain it continues: OpenAI answers 400, and which calls
        #    exist only the data decides.
        if (
            label == CREATE_RESPONSE
            and status == 400
            and code == "invalid_request"
            and re.fullmatch(
                r"input\[\d+\]\.call_id: No tool call found for function call output "
                r"with call_id .*\.",
                detail,
                re.DOTALL,
            )
        ):
            return _drop(f"ST202 {label} 400 output without its call")

        # 7d. A `compaction` item this service did not seal: its `encrypted_content` is
        #    checked against the server's key, which no schema can know.
        if (
            label in OPENAI_INPUT_OPERATIONS
            and status == 400
            and re.fullmatch(
                r"[a-z_]+\[\d+\]\.encrypted_content: is not a compaction this service made "
                r"for this tenant, or it was altered",
                detail,
            )
        ):
            return _drop(f"ST202 {label} 400 compaction not sealed here")

        # 8a. Too few items to compact: the request is valid, but the session holds no
        #    more than `keep_recent_items` items not yet summarised, and the contract
        #    answers 400 `nothing_to_compact`. Only the data decides.
        if label == COMPACT and status == 400 and code == "nothing_to_compact":
            return _drop(f"ST202 {label} 400 nothing_to_compact")

    # 8b. A compaction asks the LLM for its summary; the conformance server's LLM is an
    #    address nothing listens on, so the contract's answer is the LLM's error code
    #    (`llm_unavailable`, 502). Native runs fail the same way inside a 200.
    if label == COMPACT and status in (502, 504) and code.startswith("llm_"):
        return _drop(f"{failure.code} {label} {status} {code} (no LLM here)")
    # 8d. The same for OpenAI's compact, whose 502 the server-error check alone flags.
    if (
        label == "POST /v1/responses/compact"
        and failure.code == SERVER_ERROR
        and status in (502, 504)
        and code.startswith("llm_")
    ):
        return _drop(f"{failure.code} {label} {status} {code} (no LLM here)")

    # 8e. A response waited for answers its LLM's failure as OpenAI does, with the
    #    status of the cause: here 502 or 504, as for 8d.
    if (
        label == CREATE_RESPONSE
        and failure.code == SERVER_ERROR
        and status in (502, 504)
        and code == "server_error"
        and detail.startswith("llm_")
    ):
        return _drop(f"{failure.code} {label} {status} {detail.split(':')[0]} (no LLM here)")

    if failure.code == CREATED_NOT_FOUND and status == 404:
        # 8. A run on an agent that does not exist: the session was created, but the run
        #    names an agent (as `agent_id`, or through the session's `agent_id`) that no
        #    one created, and the contract answers 404 `agent_not_found`. The check takes
        #    any 404 below a created resource for "the resource is missing".
        if label == CREATE_RUN and code == "agent_not_found":
            body = case.body if isinstance(case.body, dict) else {}
            if detail in (
                f"no agent with id `{body.get('agent_id')}`",
                (
                    f"session `{session_id}` names agent `{SESSION_AGENTS.get(session_id)}`, "
                    "which does not exist"
                ),
            ):
                return _drop("ST302 create_run 404 agent_not_found")
        # 8c. A session given an agent that does not exist (or no longer does): the
        #    contract refuses the `agent_id` with 404 `agent_not_found` at create and
        #    patch. The check takes any 404 below a created resource for "the resource
        #    is missing".
        if label in (CREATE_SESSION, UPDATE_SESSION) and code == "agent_not_found":
            body = case.body if isinstance(case.body, dict) else {}
            if detail == f"no agent with id `{body.get('agent_id')}`":
                return _drop(f"ST302 {label} 404 agent_not_found")
        # 9. Popping a session without items: the session was created and exists, but the
        #    contract answers a pop on an empty session with 404 `session_empty`. The
        #    check takes any 404 below a created resource for "the resource is missing".
        if label == POP and code == "session_empty":
            return _drop("ST302 pop_last_item 404 session_empty")
        # 10. An item that a pop has removed since its append. The check counts a DELETE
        #    as the removal of the resources its path names; a pop's path names "the
        #    newest item", whichever that is.
        if label in ITEM_OPERATIONS and code == "item_not_found" and item in POPPED_ITEMS:
            return _drop(f"ST302 {label} 404 item_not_found (item popped since)")
        # 11. An item named by a replayed append that has been removed since the first
        #    append (or its session deleted): the replay rightly repeats the first response.
        if (
            label in ITEM_OPERATIONS
            and code in ("item_not_found", "session_not_found")
            and item in REPLAYED_ITEMS
        ):
            return _drop(f"ST302 {label} 404 {code} (item of a replayed append)")

    if failure.code == DELETED_STILL_THERE and 200 <= status < 300:
        freed = str(getattr(failure, "free", ""))
        # 12. The item list after a clear. `DELETE /v1/sessions/{id}/items` is
        #    `clear_session`: it removes the items and keeps the session, whose item list
        #    then reads as a page: empty, or holding only items appended since (an item
        #    that outlived the clear is still a failure). The check takes a DELETE of a
        #    path for the end of everything at and below it.
        if (
            label == "GET /v1/sessions/{session_id}/items"
            and freed == f"DELETE /v1/sessions/{session_id}/items"
            and _appended_since(session_id, _listed_ids(response), CLEARED_AT.get(session_id, 0))
        ):
            return _drop("ST301 list_items 200 after clear_items")
        # 12b. The same for a session's checkpoints: deleting them keeps the session,
        #    whose checkpoints then read as those put since, if any.
        if label in (LIST_CHECKPOINTS, GET_CHECKPOINT) and freed == f"DELETE /v1/sessions/{session_id}/checkpoints":
            if _checkpointed_since(session_id, response):
                return _drop(f"ST301 {label} 200 after delete_checkpoints")
        # 13. A deleted session that an append has created again since (the contract:
        #    appending to an unknown session creates it). Items read or listed must be
        #    ones appended since the delete; an item that outlived it is still a failure.
        if freed == f"DELETE /v1/sessions/{session_id}" and session_id in RECREATED_SESSIONS:
            deleted = DELETED_AT.get(session_id, 0)
            if label in ITEM_OPERATIONS:
                fresh = _appended_since(session_id, [item[1]], deleted)
            elif label == "GET /v1/sessions/{session_id}/items":
                fresh = _appended_since(session_id, _listed_ids(response), deleted)
            else:
                fresh = True
            if fresh:
                return _drop(f"ST301 {label} {status} (session created again by an append)")

    return True
