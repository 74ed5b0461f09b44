"""Authentication on (``ADMIN_API_KEY``): the ``openai`` package's ``api_key`` is a
tenant's key, and one tenant cannot see another's conversations or responses."""

from __future__ import annotations

import secrets
import uuid
from typing import Any, Dict, Iterator

import httpx
import pytest
from openai import AuthenticationError, BadRequestError, NotFoundError, PermissionDeniedError

from sessions_testkit.fake_llm import FakeLLM
from sessions_testkit.server import Service, binary_from_env, run_service

from .support import MODEL, MODEL_ENV, backend, openai_client

ADMIN_KEY = secrets.token_urlsafe(32)


@pytest.fixture(scope="module")
def guarded(fake_llm: FakeLLM) -> Iterator[Service]:
    """The service with authentication on."""
    env = {**MODEL_ENV, "ADMIN_API_KEY": ADMIN_KEY}
    with run_service(
        binary_from_env(), backend(), llm_base_url=fake_llm.base_url, env=env
    ) as running:
        yield running


@pytest.fixture(scope="module")
def keys(guarded: Service) -> Dict[str, str]:
    """A read-write key of tenants ``a`` and ``b``, and a read-only key of ``a``."""
    made: Dict[str, str] = {}
    admin = {"authorization": f"Bearer {ADMIN_KEY}"}
    wanted = {
        "a": ("a", ["read", "write"]),
        "b": ("b", ["read", "write"]),
        "a-read": ("a", ["read"]),
    }
    with httpx.Client(base_url=guarded.url, headers=admin) as http:
        for name, (tenant, scopes) in wanted.items():
            body = {"tenant": tenant, "name": f"openai tests {name}", "scopes": scopes}
            response = http.post("/v1/api_keys", json=body)
            assert response.status_code == 201, response.text
            made[name] = response.json()["key"]
    return made


async def test_a_tenant_sees_only_its_own(guarded: Service, keys: Dict[str, str]) -> None:
    async with (
        openai_client(guarded, keys["a"]) as a,
        openai_client(guarded, keys["b"]) as b,
        openai_client(guarded, keys["a-read"]) as a_reader,
    ):
        conversation = await a.conversations.create(
            items=[{"role": "user", "content": "a's secret"}]
        )
        response = await a.responses.create(
            model=MODEL, input="a's question", conversation=conversation.id
        )
        assert response.output_text == "echo: a's question"

        with pytest.raises(NotFoundError):
            await b.conversations.retrieve(conversation.id)
        with pytest.raises(NotFoundError):
            await b.conversations.items.list(conversation.id)
        with pytest.raises(NotFoundError):
            await b.conversations.delete(conversation.id)
        with pytest.raises(NotFoundError):
            await b.responses.create(model=MODEL, input="x", conversation=conversation.id)
        with pytest.raises(NotFoundError):
            await b.responses.retrieve(response.id)
        with pytest.raises(NotFoundError):
            await b.responses.input_items.list(response.id)
        with pytest.raises(NotFoundError):
            await b.responses.delete(response.id)
        with pytest.raises(BadRequestError) as unknown:
            await b.responses.create(model=MODEL, input="x", previous_response_id=response.id)
        assert unknown.value.code == "previous_response_not_found"

        # A sealed compaction of a's does not open for b.
        compacted = await a.responses.compact(model=MODEL, previous_response_id=response.id)
        sealed = compacted.output[-1].model_dump()["encrypted_content"]
        forged: Any = {"type": "compaction", "encrypted_content": sealed}
        with pytest.raises(BadRequestError) as raised:
            await b.responses.create(model=MODEL, input=[forged])
        assert raised.value.param == "input[0].encrypted_content"
        assert (await a.responses.create(model=MODEL, input=[forged])).status == "completed"

        # a's read-only key reads but does not write.
        assert (await a_reader.conversations.retrieve(conversation.id)).id == conversation.id
        assert (await a_reader.responses.retrieve(response.id)).id == response.id
        with pytest.raises(PermissionDeniedError):
            await a_reader.conversations.create()
        with pytest.raises(PermissionDeniedError):
            await a_reader.responses.create(model=MODEL, input="x")

        items = [i async for i in a.conversations.items.list(conversation.id, order="asc")]
        assert len(items) == 3  # a's message, a's question and the answer; nothing of b's


async def test_keys_are_required(guarded: Service, keys: Dict[str, str]) -> None:
    async with openai_client(guarded, f"ask_{uuid.uuid4().hex}") as stranger:
        with pytest.raises(AuthenticationError) as raised:
            await stranger.conversations.create()
        assert raised.value.status_code == 401
        assert raised.value.type == "authentication_error"
    async with openai_client(guarded, ADMIN_KEY) as admin:
        with pytest.raises(PermissionDeniedError):
            await admin.conversations.create()
