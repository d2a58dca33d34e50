"""mem0's own platform client (`mem0ai`, pinned in .ci/run) against a real
`mosaic serve`: `MemoryClient` and `AsyncMemoryClient` unmodified, only
their `host` pointing at this server and their `api_key` a principal key.

The Rust test `mem0s_own_platform_client_works_against_a_real_server`
(crates/mosaic-cli/tests/it/clients.rs) runs this suite with
`MOSAIC_MEM0_CLIENT` (the directory `mem0ai` is installed into) on
PYTHONPATH.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

# No telemetry leaves the test (mem0 reads this when it is imported).
os.environ["MEM0_TELEMETRY"] = "False"

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mosaic_test_server import MosaicServer, fresh_principal  # noqa: E402

from mem0 import AsyncMemoryClient, MemoryClient  # noqa: E402
from mem0.exceptions import MemoryError as Mem0Error  # noqa: E402
from mem0.exceptions import AuthenticationError, MemoryNotFoundError, ValidationError  # noqa: E402


@pytest.fixture(scope="module")
def server():
    s = MosaicServer()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def principal(server):
    return fresh_principal(server)


def texts(listing):
    return sorted(m["memory"] for m in listing["results"])


def test_memory_client_round_trip(server, principal):
    user = principal["principal"]
    client = MemoryClient(api_key=principal["key"], host=server.url)

    added = client.add(
        [
            {"role": "user", "content": "I am vegetarian and allergic to nuts."},
            {"role": "user", "content": "I live in Lisbon."},
        ],
        user_id=user,
        run_id="trip",
        metadata={"topic": "profile"},
    )
    assert [r["event"] for r in added["results"]] == ["ADD", "ADD"]
    assert "ignored" not in added or added["ignored"] == [], "metadata is stored"
    food, lisbon = (r["id"] for r in added["results"])
    assert client.get(food)["metadata"] == {"topic": "profile"}
    client.add("I play the cello.", user_id=user)

    found = client.search("what can I cook, as I am allergic?", filters={"user_id": user}, top_k=2)
    assert 1 <= len(found["results"]) <= 2
    assert found["results"][0]["memory"] == "user: I am vegetarian and allergic to nuts."
    assert all(0.0 <= r["score"] < 1.0 for r in found["results"])
    in_trip = client.search("where do I live", filters={"AND": [{"user_id": user}, {"run_id": "trip"}]})
    assert {r["id"] for r in in_trip["results"]} <= {food, lisbon}

    # Filters on metadata (by name, or under "metadata") and on created_at
    # run on the server before ranking: only the matching memories come back.
    cello = client.search("cello", filters={"user_id": user}, top_k=1)["results"][0]["id"]
    assert cello not in (food, lisbon)
    profile = client.search(
        "cello, vegetarian, Lisbon", filters={"AND": [{"user_id": user}, {"topic": "profile"}]}, top_k=5
    )
    assert {r["id"] for r in profile["results"]} == {food, lisbon}
    not_profile = client.search(
        "cello, vegetarian, Lisbon", filters={"AND": [{"user_id": user}, {"NOT": [{"topic": "profile"}]}]}
    )
    assert [r["id"] for r in not_profile["results"]] == [cello]
    listed = client.get_all(filters={"AND": [{"user_id": user}, {"metadata": {"topic": {"in": ["profile"]}}}]})
    assert listed["count"] == 2 and {r["id"] for r in listed["results"]} == {food, lisbon}
    later = client.get_all(filters={"AND": [{"user_id": user}, {"created_at": {"gte": "2999-01-01"}}]})
    assert later["count"] == 0
    # A field this service has no value for is refused, never dropped.
    with pytest.raises(ValidationError) as refused:
        client.search("food", filters={"AND": [{"user_id": user}, {"categories": {"contains": "food"}}]})
    assert "unsupported_filter" in str(refused.value)

    page = client.get_all(filters={"user_id": user}, page=1, page_size=2)
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    rest = client.get_all(filters={"user_id": user}, page=2, page_size=2)
    assert rest["next"] is None and len(rest["results"]) == 1

    assert client.get(lisbon)["memory"] == "user: I live in Lisbon."
    updated = client.update(lisbon, text="I live in Porto.", metadata={"k": 1})
    assert updated["message"] == "Memory updated successfully!"
    assert updated["ignored"] == ["metadata"]
    porto = updated["id"]
    history = client.history(porto)
    assert [(e["event"], e["new_memory"]) for e in history] == [
        ("ADD", "user: I live in Lisbon."),
        ("UPDATE", "I live in Porto."),
    ]

    entities = client.users()
    assert {(e["type"], e["name"]) for e in entities["results"]} == {("user", user), ("run", "trip")}

    batch = client.batch_update([{"memory_id": food, "text": "I am vegan."}])
    vegan = batch["results"][0]["id"]
    assert client.get(vegan)["memory"] == "I am vegan."
    gone = client.batch_delete([{"memory_id": vegan}])
    assert len(gone["deleted"]) == 2, "both versions of the line"
    with pytest.raises(MemoryNotFoundError):
        client.get(vegan)

    deleted = client.delete(porto)
    assert deleted["message"] == "Memory deleted successfully!"
    assert len(deleted["deleted"]) == 2
    with pytest.raises(MemoryNotFoundError):
        client.get(lisbon)
    assert client.history(porto) == [], "no deleted text stays readable"

    cleared = client.delete_all(user_id=user)
    assert len(cleared["deleted"]) == 1
    assert client.get_all(filters={"user_id": user})["results"] == []


def test_delete_users_deletes_a_runs_memories(server, principal):
    user = principal["principal"]
    client = MemoryClient(api_key=principal["key"], host=server.url)
    client.add("Packed the passport.", user_id=user, run_id="trip")
    client.add("Pays rent monthly.", user_id=user)
    assert client.delete_users(run_id="trip") == {"message": "Entity deleted successfully."}
    assert texts(client.get_all(filters={"user_id": user})) == ["user: Pays rent monthly."]


def test_async_memory_client_round_trip(server, principal):
    user = principal["principal"]

    async def scenario():
        client = AsyncMemoryClient(api_key=principal["key"], host=server.url)
        added = await client.add("I drink green tea.", user_id=user, metadata={"k": "v"})
        assert "ignored" not in added or added["ignored"] == []
        memory_id = added["results"][0]["id"]
        assert (await client.get(memory_id))["metadata"] == {"k": "v"}
        found = await client.search("what do I drink", filters={"user_id": user})
        assert [r["id"] for r in found["results"]] == [memory_id]
        assert (await client.get(memory_id))["memory"] == "user: I drink green tea."
        updated = await client.update(memory_id, text="I drink black tea.")
        history = await client.history(updated["id"])
        assert [e["event"] for e in history] == ["ADD", "UPDATE"]
        listed = await client.get_all(filters={"user_id": user})
        assert texts(listed) == ["I drink black tea."]
        users = await client.users()
        assert ("user", user) in {(e["type"], e["name"]) for e in users["results"]}
        await client.delete(updated["id"])
        await client.add("I cycle to work.", user_id=user)
        cleared = await client.delete_all(user_id=user)
        assert len(cleared["deleted"]) == 1
        assert (await client.get_all(filters={"user_id": user}))["results"] == []
        await client.async_client.aclose()

    asyncio.run(scenario())


def test_another_principals_memory_is_missing_through_the_client(server):
    alice, bob = fresh_principal(server), fresh_principal(server)
    a = MemoryClient(api_key=alice["key"], host=server.url)
    b = MemoryClient(api_key=bob["key"], host=server.url)
    secret = a.add("Alice's secret.", user_id=alice["principal"])["results"][0]["id"]
    for call in (
        lambda: b.get(secret),
        lambda: b.history(secret),
        lambda: b.update(secret, text="x"),
        lambda: b.delete(secret),
        lambda: b.get("rec-never-existed"),
    ):
        with pytest.raises(MemoryNotFoundError):
            call()
    assert a.get(secret)["memory"] == "user: Alice's secret."


def test_a_batch_update_the_gate_refuses_part_of_updates_nothing(server, principal):
    """The server commits a batch update in one transaction: when the write
    gate refuses its second memory (a duplicate of another memory, the
    server's text guard), mem0's client raises (409 `write_refused`) and
    the first memory keeps its text."""
    user = principal["principal"]
    client = MemoryClient(api_key=principal["key"], host=server.url)
    first = client.add("The codename is Heron.", user_id=user)["results"][0]["id"]
    second = client.add("The launch is in March.", user_id=user)["results"][0]["id"]
    client.add("The budget is twelve thousand euros for the whole quarter.", user_id=user)
    before = texts(client.get_all(filters={"user_id": user}))
    with pytest.raises(ValidationError) as refused:
        client.batch_update(
            [
                {"memory_id": first, "text": "The codename is Egret."},
                {"memory_id": second, "text": "user: The budget is twelve thousand euros for the whole quarter."},
            ]
        )
    assert "write_refused" in str(refused.value)
    assert client.get(first)["memory"] == "user: The codename is Heron."
    assert texts(client.get_all(filters={"user_id": user})) == before


def test_out_of_scope_platform_calls_fail_clearly(server, principal):
    client = MemoryClient(api_key=principal["key"], host=server.url)
    for call in (
        lambda: client.get_summary(filters={"user_id": principal["principal"]}),
        lambda: client.create_memory_export(schema="{}", user_id=principal["principal"]),
        lambda: client.get_webhooks(project_id="p1"),
    ):
        with pytest.raises(Mem0Error) as raised:
            call()
        assert "not_supported" in str(raised.value) or "not offered" in str(raised.value)
    with pytest.raises(ValidationError):
        client.get_all(filters={"app_id": "a"})


def test_an_application_key_names_its_user_in_a_header(server):
    """mem0's client names no user on get, update, delete, history, users
    and batches; with an application key the user comes in the
    `X-Mosaic-User` header, set on the httpx client handed to it (mem0
    keeps a caller's headers)."""
    import httpx

    tenant = fresh_principal(server)["tenant"]
    created = server.admin.post(
        "/v1/admin/application-keys",
        json={
            "tenant_id": tenant,
            "application_id": "app1",
            "users": ["app1:*"],
            "grant": {"allowed_workspace_ids": ["ws-1"]},
        },
    )
    created.raise_for_status()
    app, user = created.json()["key"], "app1:ann"
    headers = {"Authorization": f"Bearer {app}", "X-Mosaic-User": user}
    httpx.post(
        f"{server.url}/v1/consents",
        headers=headers,
        json={"purpose": "personalization", "ui_release": "sdk-tests-v1"},
        timeout=30,
    ).raise_for_status()

    client = MemoryClient(api_key=app, host=server.url, client=httpx.Client(headers={"X-Mosaic-User": user}))
    memory_id = client.add("Ann likes tea.", user_id=user)["results"][0]["id"]
    assert client.get(memory_id)["memory"] == "user: Ann likes tea."
    assert [r["id"] for r in client.search("tea", filters={"user_id": user})["results"]] == [memory_id]
    assert ("user", user) in {(e["type"], e["name"]) for e in client.users()["results"]}

    # Without the header the key acts for nobody (the auth layer: 400
    # user_required), and naming a user outside its bounds is refused.
    bare = MemoryClient(api_key=app, host=server.url)
    with pytest.raises(ValidationError):
        bare.get(memory_id)
    with pytest.raises(AuthenticationError):
        client.search("tea", filters={"user_id": "other:zed"})
    client.delete(memory_id)
    with pytest.raises(MemoryNotFoundError):
        client.get(memory_id)
