"""The async client against a real `mosaic serve`."""

import asyncio

import pytest

from mosaic_memory import AsyncMosaic, NotFoundError


def run(coro):
    return asyncio.run(coro)


def test_async_client_round_trip(server, principal):
    async def scenario():
        async with AsyncMosaic(principal["key"], server.url) as client:
            ingest = await client.add_messages(
                "chat-a", [{"id": "a1", "role": "user", "content": "My cat is called Miso."}]
            )
            assert ingest.kept == 1
            fact = await client.add_fact("My cat is called Miso", [{"conversation_id": "chat-a", "message_id": "a1"}])
            assert fact.accepted, fact.violations
            found, explained, listed = await asyncio.gather(
                client.search("cat name", kinds=["semantic"]),
                client.explain("cat name"),
                client.list(),
            )
            assert found.record_ids == [fact.record_id]
            assert explained.decisions
            assert {m.record_id for m in listed} == {fact.record_id, ingest.messages[0].record_id}
            assert (await client.get(fact.record_id)).content == "My cat is called Miso"
            assert (await client.verify(fact)).valid
            deletion = await client.delete(fact.record_id)
            assert deletion.finalized
            assert (await client.verify(deletion.receipt)).valid
            history = await client.history(fact.record_id)
            assert history.deletion is not None
            erasure = await client.delete_all()
            assert erasure.complete and len(erasure.receipts) >= 1
            with pytest.raises(NotFoundError):
                await client.history("no-such-record")

    run(scenario())


def test_async_items_by_address(server, principal):
    async def scenario():
        async with AsyncMosaic(principal["key"], server.url) as client:
            first = await client.put_item(["prefs", "ui"], "theme", "Dark mode, please.", metadata={"v": 1})
            assert first.accepted, first.violations
            second = await client.put_item(["prefs", "ui"], "theme", "Light mode now.", metadata={"v": 2})
            assert second.accepted and second.line_generation == 2
            got = await client.get_item(["prefs", "ui"], "theme")
            assert got.content == "Light mode now." and got.record["metadata"] == {"v": 2}
            found = await client.search("mode", filter={"v": 2})
            assert found.record_ids == [second.record_id]
            assert await client.namespaces() == [("prefs", "ui")]
            assert await client.namespaces(prefix=["*", "ui"], max_depth=1) == [("prefs",)]
            deletions = await client.delete_item(["prefs", "ui"], "theme")
            assert sorted(d.record_id for d in deletions) == sorted([first.record_id, second.record_id])
            with pytest.raises(NotFoundError):
                await client.get_item(["prefs", "ui"], "theme")
            with pytest.raises(NotFoundError):
                await client.delete_item(["prefs", "ui"], "theme")
            assert await client.namespaces() == []

    run(scenario())
