"""MosaicStore (the LangGraph store) against a real `mosaic serve`.
LangGraph's own store tests run too (see tests_langgraph/)."""

import asyncio
import os
import time
from datetime import datetime

import pytest

if os.environ.get("CI") == "true":
    import langgraph.store.base  # noqa: F401  (CI installs langgraph-checkpoint)
else:
    pytest.importorskip("langgraph.store.base")

from mosaic_test_server import fresh_principal  # noqa: E402

from mosaic_memory import Mosaic  # noqa: E402
from mosaic_memory.langgraph import MosaicStore, StoreWriteRefused  # noqa: E402


@pytest.fixture
def client(server, principal):
    with Mosaic(principal["key"], server.url) as c:
        yield c


@pytest.fixture
def store(client):
    return MosaicStore(client)


def test_put_get_update_and_the_line_keeps_the_earlier_value(store, client):
    ns = ("users", "u1", "prefs")
    store.put(ns, "theme", {"color": "dark", "size": 3})
    first = store.get(ns, "theme")
    assert first.value == {"color": "dark", "size": 3}
    assert isinstance(first.created_at, datetime)
    store.put(ns, "theme", {"color": "light"})
    second = store.get(ns, "theme")
    assert second.value == {"color": "light"}
    assert second.created_at == first.created_at
    assert second.updated_at >= first.updated_at
    assert store.get(ns, "missing") is None
    # A fresh store over the same key reads the same items (nothing is local).
    again = MosaicStore(Mosaic(client._http.headers["Authorization"].split()[1], str(client._http.base_url)))
    assert again.get(ns, "theme").value == {"color": "light"}
    # The earlier value is the line's earlier generation, no longer active.
    facts = [m for m in client.list() if m.kind == "semantic"]
    assert sorted(m.state for m in facts) == ["active", "superseded"]


def test_delete_revokes_every_record_of_the_key(store, client):
    ns = ("docs",)
    store.put(ns, "a", {"text": "alpha"})
    store.put(ns, "a", {"text": "alpha two"})
    store.put(ns, "b", {"text": "beta"})
    store.delete(ns, "a")
    assert store.get(ns, "a") is None
    assert store.get(ns, "b").value == {"text": "beta"}
    states = {}
    for m in client.list():
        content = client.history(m.record_id)
        states[m.record_id] = (m.state, content.deletion is not None)
    revoked = [rid for rid, (state, deleted) in states.items() if deleted]
    # Two fact generations and two captured messages of `a`.
    assert len(revoked) == 4
    assert all(client.history(rid).deletion.finalized for rid in revoked)


def test_search_ranks_by_query_filters_values_and_pages(store):
    ns = ("memories", "u1")
    store.put(ns, "k1", {"text": "the user likes green tea", "topic": "food"})
    store.put(ns, "k2", {"text": "the user plays chess on sundays", "topic": "hobby"})
    store.put(ns, "k3", {"text": "the user drinks coffee", "topic": "food", "n": 5})
    store.put(("other",), "k4", {"text": "chess club", "topic": "hobby"})
    ranked = store.search(("memories",), query="chess sundays")
    assert ranked[0].key == "k2"
    assert ranked[0].score is not None and ranked[0].score > 0
    assert {i.key for i in ranked} == {"k1", "k2", "k3"}
    food = store.search(("memories",), filter={"topic": "food"})
    assert {i.key for i in food} == {"k1", "k3"}
    assert all(i.score is None for i in food)
    assert [i.key for i in store.search(("memories",), filter={"n": {"$gt": 4}})] == ["k3"]
    everything = store.search(())
    assert len(everything) == 4
    assert store.search((), limit=2, offset=1) == everything[1:3]
    assert store.list_namespaces() == [("memories", "u1"), ("other",)]
    assert store.list_namespaces(prefix=("memories",)) == [("memories", "u1")]
    assert store.list_namespaces(max_depth=1) == [("memories",), ("other",)]


def test_ttl_expires_an_item(store):
    store.put(("t",), "short", {"v": 1}, ttl=0.02)  # 1.2 s
    store.put(("t",), "long", {"v": 2})
    assert store.get(("t",), "short").value == {"v": 1}
    time.sleep(1.5)
    assert store.get(("t",), "short") is None
    assert store.get(("t",), "long").value == {"v": 2}
    with pytest.raises(ValueError, match="exceeds the tenant policy"):
        store.put(("t",), "forever", {"v": 3}, ttl=10.0**9)


def test_a_refused_put_raises_and_keeps_nothing(server):
    p = fresh_principal(server, consent=False)
    client = Mosaic(p["key"], server.url)
    store = MosaicStore(client)
    with pytest.raises(StoreWriteRefused) as e:
        store.put(("prefs",), "k", {"v": 1})
    assert e.value.code == "refused"
    assert any("consent" in v.code for v in e.value.violations), e.value.violations
    assert store.get(("prefs",), "k") is None
    live = [m for m in client.list() if m.state == "active"]
    assert live == [], "the captured message of a refused put is deleted again"


def test_values_that_are_not_json_and_client_embeddings_are_refused(store):
    with pytest.raises(TypeError, match="not JSON-serializable"):
        store.put(("x",), "k", {"when": datetime.now()})
    assert store.get(("x",), "k") is None
    with pytest.raises(ValueError, match="embed"):
        MosaicStore(store.client, index={"dims": 3, "embed": lambda texts: [[0.0] * 3 for _ in texts]})
    with pytest.raises(ValueError, match="refresh"):
        MosaicStore(store.client, ttl={"default_ttl": 1.0, "refresh_on_read": True})


def test_async_batch(store):
    async def scenario():
        await store.aput(("a",), "k", {"v": 1})
        got, listed = await asyncio.gather(store.aget(("a",), "k"), store.alist_namespaces())
        assert got.value == {"v": 1}
        assert listed == [("a",)]
        await store.adelete(("a",), "k")
        assert await store.aget(("a",), "k") is None

    asyncio.run(scenario())
