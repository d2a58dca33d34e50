"""LangMem's own memory tools (``create_manage_memory_tool``,
``create_search_memory_tool`` of ``langmem==0.0.30``) over
:class:`mosaic_memory.langgraph.MosaicStore`, against a real ``mosaic
serve`` and a tenant created with the server's default policy.

The tools call the store directly (no model is involved): create and
update are ``store.put`` under a UUID key, delete is ``store.delete``,
search is ``store.search``. LangMem is installed apart from the pinned
packages (``pip install --target``, named by ``MOSAIC_LANGMEM``); the Rust
test that runs this suite puts that directory on ``PYTHONPATH``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from mosaic_test_server import MosaicServer  # noqa: E402

from langmem import create_manage_memory_tool, create_search_memory_tool  # noqa: E402

from mosaic_memory import Mosaic  # noqa: E402
from mosaic_memory.langgraph import MosaicStore  # noqa: E402

NAMESPACE = ("memories", "alice")


@pytest.fixture(scope="module")
def server():
    s = MosaicServer()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def store(server, request):
    # A tenant with the server's defaults (no write-guard settings), one
    # principal key with consent.
    tenant = f"lm-{request.node.name[:40]}-{os.getpid()}"
    server.admin.post("/v1/admin/tenants", json={"tenant_id": tenant}).raise_for_status()
    key = server.key(tenant, "alice", ["ws-1"])
    client = Mosaic(key, server.url)
    yield MosaicStore(client)
    client.close()


def _id(answer: str, verb: str) -> str:
    m = re.fullmatch(rf"{verb} memory ([0-9a-f-]{{36}})", answer)
    assert m, answer
    return m.group(1)


def _found(search, query: str, **kw):
    return json.loads(search.invoke({"query": query, **kw}))


def test_create_update_delete_and_search_with_langmems_tools(store):
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)

    memory_id = _id(manage.invoke({"content": "Alice prefers dark mode in every editor.", "action": "create"}), "created")
    found = _found(search, "which editor theme does Alice like")
    assert [m["value"]["content"] for m in found] == ["Alice prefers dark mode in every editor."]
    assert found[0]["key"] == memory_id and found[0]["namespace"] == list(NAMESPACE)

    answer = manage.invoke({"content": "Alice now prefers light mode.", "action": "update", "id": memory_id})
    assert _id(answer, "updated") == memory_id
    found = _found(search, "dark mode editor")
    assert [m["value"]["content"] for m in found] == ["Alice now prefers light mode."]
    assert store.get(NAMESPACE, memory_id).value == {"content": "Alice now prefers light mode."}
    # The old value is served by no read: not by the store, not by a recall
    # of the server itself.
    recalled = store.client.search("Alice prefers dark mode in every editor", max_records=50)
    assert not any("dark mode" in (h.content or "") for h in recalled.hits), recalled.hits

    assert manage.invoke({"action": "delete", "id": memory_id}) == f"Deleted memory {memory_id}"
    assert _found(search, "Alice editor theme") == []
    assert store.get(NAMESPACE, memory_id) is None

    # The async tools take the same path.
    async def scenario():
        made = _id(await manage.ainvoke({"content": "Alice drinks oolong tea.", "action": "create"}), "created")
        hits = json.loads(await search.ainvoke({"query": "tea"}))
        assert [h["key"] for h in hits] == [made]

    asyncio.run(scenario())


def test_a_thousand_templated_notes_under_distinct_keys_are_all_kept(store):
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)
    texts = {}
    for i in range(1000):
        text = f"Reminder note {i}: water the office plants on Friday before leaving."
        texts[_id(manage.invoke({"content": text, "action": "create"}), "created")] = text
    assert len(texts) == 1000
    found = _found(search, "water the office plants", limit=1000)
    assert {m["key"]: m["value"]["content"] for m in found} == texts
    listed = store.search(NAMESPACE, limit=1000)
    assert len(listed) == 1000
    assert store.list_namespaces() == [NAMESPACE]
