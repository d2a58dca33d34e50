"""Export then import with the sync and async clients against a real
`mosaic serve`: into the same server every line replays and nothing is
written twice; into a new server the memories come back and are
recalled; another principal cannot cite the exporter's messages."""

import asyncio
import io
import json

import pytest
from mosaic_test_server import FAST, MosaicServer, fresh_principal

import mosaic_memory.client
from mosaic_memory import AsyncMosaic, BadRequestError, ImportedLine, Mosaic, PayloadTooLargeError

CHAT = [
    {"id": "m1", "role": "user", "name": "Dana", "created_at": "2026-05-01", "content": "I moved to Berlin last month."},
    {"id": "m2", "role": "assistant", "content": "Noted: escalations go to the on-call lead."},
]


def memories(client: Mosaic) -> None:
    """A conversation, a fact about the principal and a workspace fact,
    each citing one of its messages."""
    assert client.add_messages("chat-1", CHAT).kept == 2
    about = client.add_fact("I moved to Berlin", [("chat-1", "m1")])
    assert about.accepted, about.violations
    shared = client.add_fact("escalations go to the on-call lead", [("chat-1", "m2")], workspace_id="ws-1")
    assert shared.accepted, shared.violations


def lines(text: str):
    return [json.loads(line) for line in text.split("\n") if line]


def contents(text: str):
    """What an export holds, without ids or instants: each line's type,
    its text and the sources its record rests on."""
    out = set()
    for line in lines(text):
        data = line["data"]
        if line["type"] == "message":
            out.add(("message", data["text"], (f"msg:{data['conversation_id']}/{data['message_id']}",)))
        else:
            out.add(("memory", data["request"]["content"], tuple(s["source_id"] for s in data["record"]["sources"])))
    return out


def memory_line(text: str, content: str) -> str:
    return next(line for line in text.split("\n") if line and json.loads(line)["data"].get("request", {}).get("content") == content)


@pytest.fixture
def client(server, principal):
    with Mosaic(principal["key"], server.url) as c:
        yield c


def test_an_import_into_the_same_server_replays_every_line_and_writes_nothing_twice(client):
    memories(client)
    text = client.export()
    assert text.endswith("\n")
    assert [line["type"] for line in lines(text)] == ["message", "message", "memory", "memory"]
    assert {line["data"]["text"] for line in lines(text)[:2]} == {
        "[2026-05-01] Dana: I moved to Berlin last month.",
        "assistant: Noted: escalations go to the on-call lead.",
    }

    report = client.import_memories(text)
    assert (report.lines, report.accepted, report.rejected, report.replayed) == (4, 0, 0, 4)
    assert report.errors == {}
    assert [(r.line, r.kind, r.outcome) for r in report.results] == [
        (1, "message", "replayed"),
        (2, "message", "replayed"),
        (3, "memory", "replayed"),
        (4, "memory", "replayed"),
    ]
    assert all(isinstance(r, ImportedLine) and r.record_id for r in report.results)
    # Nothing was written twice: the export after is the export before.
    assert client.export() == text


def test_an_import_into_a_new_server_restores_the_memories_and_they_are_recalled(client, monkeypatch):
    memories(client)
    text = client.export()
    target = MosaicServer()
    try:
        with Mosaic(fresh_principal(target)["key"], target.url) as there:
            # The lines of an open file, as a backup is read back.
            report = there.import_memories(io.StringIO(text))
            assert [(r.kind, r.outcome) for r in report.results] == [
                ("message", "accepted"),
                ("message", "accepted"),
                ("memory", "accepted"),
                ("memory", "accepted"),
            ], report
            assert (report.accepted, report.errors) == (4, {})
            found = there.search("where did I move, Berlin")
            recalled = {h.content for h in found.hits}
            assert "I moved to Berlin" in recalled, found.context
            assert "[2026-05-01] Dana: I moved to Berlin last month." in recalled, found.context

            # Two lines a request, with a blank line and (in the second
            # request) a malformed one: each line keeps its number in the
            # text given, and every exported line replays.
            monkeypatch.setattr(mosaic_memory.client, "IMPORT_CHUNK_LINES", 2)
            exported = text.split("\n")
            mixed = "\n".join([""] + exported[:2] + ["{not json}"] + exported[2:])
            again = there.import_memories(mixed)
            assert again.errors == {4: "malformed_line"}
            assert [(r.line, r.outcome) for r in again.results] == [
                (2, "replayed"),
                (3, "replayed"),
                (4, "error"),
                (5, "replayed"),
                (6, "replayed"),
            ]
            assert (again.lines, again.accepted, again.replayed) == (5, 0, 4)
            assert contents(there.export()) == contents(text)
    finally:
        target.stop()


def test_another_principal_cannot_cite_the_exporters_messages(server, principal, client):
    memories(client)
    text = client.export()
    other = server.key(principal["tenant"], "user-2", ["ws-1"])
    with Mosaic(other, server.url) as bob:
        # The workspace fact without the messages it cites: the citation
        # resolves only against bob's own captures.
        cited = bob.import_memories(memory_line(text, "escalations go to the on-call lead"))
        assert cited.errors == {1: "not_found"}
        assert (cited.results[0].outcome, cited.results[0].code) == ("error", "not_found")
        # A fact about the exporter names her as its subject.
        about = bob.import_memories([memory_line(text, "I moved to Berlin")])
        assert about.errors == {1: "principal_mismatch"}
        # A body without one readable line is refused whole.
        with pytest.raises(BadRequestError) as e:
            bob.import_memories("{not json}\n")
        assert e.value.code == "malformed_body"


def test_an_application_key_exports_and_imports_for_the_user_it_names(server):
    tenant = fresh_principal(server)["tenant"]
    created = server.admin.post(
        "/v1/admin/application-keys",
        json={"tenant_id": tenant, "application_id": "app1", "users": ["app1:*"], "grant": {"allowed_workspace_ids": ["ws-1"]}},
    )
    created.raise_for_status()
    key = created.json()["key"]
    with Mosaic(key, server.url, user_id="app1:ann") as ann:
        ann.give_consent()
        memories(ann)
        text = ann.export()
        assert len(lines(text)) == 4
    with Mosaic(key, server.url) as app:
        # Without a user the key acts for nobody.
        with pytest.raises(BadRequestError) as e:
            app.export()
        assert e.value.code == "user_required"
        assert app.export(user_id="app1:ann") == text
        assert app.import_memories(text, user_id="app1:ann").replayed == 4
        assert app.export(user_id="app1:bo") == ""


def test_the_async_client_exports_and_imports(server, principal):
    async def scenario():
        async with AsyncMosaic(principal["key"], server.url) as client:
            await client.add_messages("chat-a", [{"id": "a1", "role": "user", "content": "My cat is called Miso."}])
            fact = await client.add_fact("My cat is called Miso", [("chat-a", "a1")])
            assert fact.accepted, fact.violations
            text = await client.export()
            assert [line["type"] for line in lines(text)] == ["message", "memory"]
            report = await client.import_memories(text.split("\n"))
            assert (report.lines, report.replayed, report.errors) == (2, 2, {})
            assert await client.export() == text

    asyncio.run(scenario())


def test_an_export_larger_than_the_body_limit_imports_in_several_requests(monkeypatch):
    small = MosaicServer(["--body-limit-bytes", "16384"] + FAST)
    try:
        with Mosaic(fresh_principal(small)["key"], small.url) as client:
            notes = [{"id": f"n{i}", "content": f"Note {i}: " + "the quick brown fox jumps over the lazy dog " * 20} for i in range(24)]
            for start in range(0, len(notes), 6):
                assert client.add_messages("notes", notes[start : start + 6]).kept == 6
            text = client.export()
            assert len(text.encode("utf-8")) > 16384
            # In one request the server refuses it whole.
            with pytest.raises(PayloadTooLargeError):
                client.import_memories(text)
            monkeypatch.setattr(mosaic_memory.client, "IMPORT_CHUNK_BYTES", 8192)
            report = client.import_memories(text)
            assert (report.lines, report.replayed, report.errors) == (24, 24, {})
            assert [r.line for r in report.results] == list(range(1, 25))
    finally:
        small.stop()
