"""MosaicStore (the LangGraph store) against a real `mosaic serve`.
LangGraph's own store tests run too (see tests_langgraph/)."""

import asyncio
import os
import time
from datetime import datetime

import httpx
import pytest

if os.environ.get("CI") == "true":
    import langgraph.store.base  # noqa: F401  (CI installs langgraph-checkpoint)
else:
    pytest.importorskip("langgraph.store.base")

from mosaic_test_server import fresh_principal  # noqa: E402

from mosaic_memory import Mosaic, MosaicError  # noqa: E402
from mosaic_memory.langgraph import MosaicStore, StoreWriteRefused  # noqa: E402


class Counting:
    """Counts the HTTP requests a client sends, by method and path."""

    def __init__(self) -> None:
        self.requests = []

    def __call__(self, request) -> None:
        self.requests.append((request.method, request.url.path))

    def take(self):
        out, self.requests = self.requests, []
        return out


@pytest.fixture
def counted(server, principal):
    counter = Counting()
    http = httpx.Client(
        base_url=server.url,
        headers={"Authorization": f"Bearer {principal['key']}"},
        event_hooks={"request": [counter]},
    )
    with Mosaic(principal["key"], server.url, http_client=http) as c:
        yield c, counter


@pytest.fixture
def client(counted):
    return counted[0]


@pytest.fixture
def store(client):
    return MosaicStore(client)


def test_get_put_delete_search_and_list_are_one_request_each(counted):
    client, requests = counted
    store = MosaicStore(client)
    ns = ("users", "u1", "prefs")
    store.put(ns, "theme", {"color": "dark", "size": 3})
    assert requests.take() == [("PUT", "/v1/items")]
    assert store.get(ns, "theme").value == {"color": "dark", "size": 3}
    assert requests.take() == [("GET", "/v1/items")]
    assert store.get(ns, "missing") is None
    assert requests.take() == [("GET", "/v1/items")]
    assert [i.key for i in store.search(("users",), filter={"color": "dark"})] == ["theme"]
    assert requests.take() == [("POST", "/v1/recall")]
    assert [i.key for i in store.search(("users",), query="dark", limit=5)] == ["theme"]
    assert requests.take() == [("POST", "/v1/recall")]
    assert store.list_namespaces(prefix=("users",)) == [ns]
    assert requests.take() == [("GET", "/v1/namespaces")]
    store.delete(ns, "theme")
    assert requests.take() == [("DELETE", "/v1/items")]
    store.delete(ns, "theme")  # nothing there: still one request, no error
    assert requests.take() == [("DELETE", "/v1/items")]
    assert store.get(ns, "theme") is None


def test_put_get_update_and_the_line_keeps_the_earlier_value(store, client):
    ns = ("users", "u1", "prefs")
    store.put(ns, "theme", {"color": "dark", "size": 3})
    first = store.get(ns, "theme")
    assert first.value == {"color": "dark", "size": 3}
    assert isinstance(first.created_at, datetime)
    store.put(ns, "theme", {"color": "light"})
    second = store.get(ns, "theme")
    assert second.value == {"color": "light"}
    assert second.updated_at >= first.updated_at
    assert store.get(ns, "missing") is None
    # A fresh store over the same key reads the same items (nothing is local).
    again = MosaicStore(Mosaic(client._http.headers["Authorization"].split()[1], str(client._http.base_url)))
    assert again.get(ns, "theme").value == {"color": "light"}
    # The earlier value is the line's earlier generation, no longer active,
    # and search never serves it.
    facts = [m for m in client.list() if m.kind == "semantic"]
    assert sorted(m.state for m in facts) == ["active", "superseded"]
    assert [i.value for i in store.search(("users",))] == [{"color": "light"}]
    assert store.search(("users",), filter={"color": "dark"}) == []


def test_delete_revokes_every_version_of_the_key(store, client):
    ns = ("docs",)
    store.put(ns, "a", {"text": "alpha"})
    store.put(ns, "a", {"text": "alpha two"})
    store.put(ns, "b", {"text": "beta"})
    store.delete(ns, "a")
    assert store.get(ns, "a") is None
    assert store.get(ns, "b").value == {"text": "beta"}
    deleted = [m for m in client.list() if client.history(m.record_id).deletion is not None]
    # Both versions of `a`, each to a finalized deletion receipt.
    assert len(deleted) == 2
    assert all(client.history(m.record_id).deletion.finalized for m in deleted)
    # The same value written again is a new item, not a replay of the old.
    store.put(ns, "a", {"text": "alpha"})
    assert store.get(ns, "a").value == {"text": "alpha"}


def test_search_ranks_by_query_filters_values_on_the_server_and_pages(store):
    ns = ("memories", "u1")
    store.put(ns, "k1", {"text": "the user likes green tea", "topic": "food", "score": 4.5, "meta": {"lang": "en"}})
    store.put(ns, "k2", {"text": "the user plays chess on sundays", "topic": "hobby", "score": 3, "meta": {"lang": "de"}})
    store.put(ns, "k3", {"text": "the user drinks coffee", "topic": "food", "n": 5, "score": -1.25, "tags": ["a", "b"]})
    store.put(("other",), "k4", {"text": "chess club", "topic": "hobby"})
    ranked = store.search(("memories",), query="chess sundays")
    assert ranked[0].key == "k2"
    assert ranked[0].score is not None and ranked[0].score > 0
    assert {i.key for i in ranked} == {"k1", "k2", "k3"}

    def keys(**kwargs):
        return sorted(i.key for i in store.search(("memories",), **kwargs))

    assert keys(filter={"topic": "food"}) == ["k1", "k3"]
    assert all(i.score is None for i in store.search(("memories",), filter={"topic": "food"}))
    assert keys(filter={"n": {"$gt": 4}}) == ["k3"]
    assert keys(filter={"score": {"$gt": 3.2}}) == ["k1"]
    assert keys(filter={"score": {"$gte": 3, "$lt": 4.5}}) == ["k2"]
    assert keys(filter={"score": {"$lte": 0}}) == ["k3"]
    assert keys(filter={"score": 3.0}) == ["k2"]
    assert keys(filter={"topic": {"$ne": "food"}}) == ["k2"]
    assert keys(filter={"meta": {"lang": "de"}}) == ["k2"]
    assert keys(filter={"tags": ["a", "b"]}) == ["k3"]
    assert keys(filter={"topic": "food", "score": {"$gt": 0}}) == ["k1"]
    assert keys(query="coffee", filter={"topic": "food"}) == ["k1", "k3"]
    # Decided in the client where the index cannot: a null.
    assert keys(filter={"n": None}) == ["k1", "k2"]
    everything = store.search(())
    assert len(everything) == 4
    assert store.search((), limit=2, offset=1) == everything[1:3]
    assert store.list_namespaces() == [("memories", "u1"), ("other",)]
    assert store.list_namespaces(prefix=("memories",)) == [("memories", "u1")]
    assert store.list_namespaces(suffix=("u1",)) == [("memories", "u1")]
    assert store.list_namespaces(prefix=("*", "u1")) == [("memories", "u1")]
    assert store.list_namespaces(max_depth=1) == [("memories",), ("other",)]
    assert store.list_namespaces(limit=1, offset=1) == [("other",)]


def test_the_value_index_fits_the_servers_metadata_limits(store):
    big = {f"f{i}": "x" * 900 for i in range(30)}
    big["small"] = "yes"
    big["long"] = "y" * 5000
    store.put(("big",), "k", big)
    assert store.get(("big",), "k").value == big
    assert [i.key for i in store.search(("big",), filter={"small": "yes"})] == ["k"]
    assert [i.key for i in store.search(("big",), filter={"f29": "x" * 900})] == ["k"]
    assert store.search(("big",), filter={"small": "no"}) == []


def test_ttl_expires_an_item(store):
    store.put(("t",), "short", {"v": 1}, ttl=0.02)  # 1.2 s
    store.put(("t",), "long", {"v": 2})
    assert store.get(("t",), "short").value == {"v": 1}
    time.sleep(1.5)
    assert store.get(("t",), "short") is None
    assert store.get(("t",), "long").value == {"v": 2}
    with pytest.raises(MosaicError):
        store.put(("t",), "forever", {"v": 3}, ttl=10.0**9)
    assert store.get(("t",), "forever") is None


def test_a_refused_put_raises_and_keeps_nothing(server):
    p = fresh_principal(server, consent=False)
    client = Mosaic(p["key"], server.url)
    store = MosaicStore(client)
    with pytest.raises(StoreWriteRefused) as e:
        store.put(("prefs",), "k", {"v": 1})
    assert e.value.code == "refused"
    assert any("consent" in v.code for v in e.value.violations), e.value.violations
    assert store.get(("prefs",), "k") is None
    assert [m for m in client.list() if m.state == "active"] == []


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


def test_a_query_search_returns_items_beyond_the_rankers_depth(store):
    # The ranker reads about 200 candidates; the rest follow, unscored.
    for i in range(250):
        store.put(("many",), f"k{i:03d}", {"text": f"note {i} about watering the plants"})
    found = store.search(("many",), query="watering plants", limit=300)
    assert len(found) == 250
    assert len({i.key for i in found}) == 250
    scored = [i.score is not None for i in found]
    assert scored[0] and not scored[-1]
    assert scored == sorted(scored, reverse=True), "ranked items come first"
    assert [i.key for i in store.search(("many",), query="watering plants", limit=10, offset=245)] == [
        i.key for i in found[245:]
    ]


def test_the_value_index_orders_numbers_and_admits_what_it_cannot_decide():
    from mosaic_memory.langgraph import PARTIAL, _number, index_of, server_filter

    numbers = [-1e300, -2, -1.5, -0.0, 0, 1e-9, 0.5, 1, 2.25, 10, 1e20]
    texts = [_number(n) for n in numbers]
    assert texts == sorted(texts), "text order is numeric order"
    assert _number(3) == _number(3.0) and _number(-0.0) == _number(0)
    index = index_of({"a": {"b": 2.5}, "s": "#tag", "long": "x" * 2000, "rows": [{"x": 1}], "~own": 1})
    assert index["a.b"] == _number(2.5) and index["s"] == "##tag"
    assert "long" not in index and "rows" not in index and "~own" not in index
    assert index[PARTIAL] is True, "a list of objects is not indexed: filters admit the item"
    conditions, exact = server_filter({"a": {"b": {"$gt": 2}}, "s": "#tag"})
    assert conditions[0]["OR"][1] == {"metadata." + PARTIAL: True}
    # Texts order after every number, so a range is a superset on the
    # server (a numeric text or a boolean through its numeric twin), decided
    # again in the client.
    assert not exact
    _, exact = server_filter({"s": "#tag"})
    assert exact, "an equality on a text is decided on the server"
    index = index_of({"n": "5", "t": True, "i": "inf", "a.b": 1})
    assert index["~n.n"] == _number(5) and index["~n.t"] == _number(1)
    assert "a.b" not in index and index[PARTIAL] is True
    _, exact = server_filter({"n": None})
    assert not exact, "a null is decided in the client"
    with pytest.raises(ValueError, match="unsupported filter operator"):
        server_filter({"n": {"$like": "x"}})


def test_range_and_dotted_filters_decide_as_langgraphs_own_store(store):
    """Numeric texts and booleans compare as numbers under a range (LangGraph
    applies ``float``), and a key holding a dot is not the nested path of the
    same spelling: the server's answer matches ``InMemoryStore``'s."""
    from langgraph.store.memory import InMemoryStore

    reference = InMemoryStore()
    values = {
        "text-five": {"n": "5"},
        "twenty": {"n": 20},
        "true": {"n": True},
        "word": {"n": "abc"},
        "dotted": {"a.b": 1},
        "nested": {"a": {"b": 1}},
    }
    for key, value in values.items():
        store.put(("ranges",), key, value)
        reference.put(("ranges",), key, value)
    for flt in (
        {"n": {"$lt": 10}},
        {"n": {"$gte": 1}},
        {"n": {"$gt": 10}},
        {"a": {"b": 1}},
        {"a.b": 1},
    ):
        try:
            expected = sorted(i.key for i in reference.search(("ranges",), filter=flt, limit=20))
        except (TypeError, ValueError):
            # InMemoryStore raises on a text float() cannot read; such a
            # value matches nothing here.
            expected = sorted(
                i.key
                for i in reference.search(("ranges",), limit=20)
                if i.key != "word" and _reference_matches(i.value, flt)
            )
        got = sorted(i.key for i in store.search(("ranges",), filter=flt, limit=20))
        assert got == expected, (flt, got, expected)


def _reference_matches(value, flt):
    from mosaic_memory.langgraph import _matches

    return _matches(value, flt)
