"""The sync client against a real `mosaic serve`."""

import httpx
import pytest

from mosaic_memory import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ConnectionFailed,
    Mosaic,
    MosaicError,
    NotFoundError,
    PermissionDeniedError,
)

CHAT = [
    {"id": "m1", "role": "user", "name": "Vinay", "created_at": "2026-05-01", "content": "I moved to Berlin last month."},
    {"id": "m2", "role": "assistant", "content": "Noted, Berlin it is."},
]


@pytest.fixture
def client(server, principal):
    with Mosaic(principal["key"], server.url) as c:
        yield c


def test_add_messages_keeps_each_message_and_replay_adds_nothing(client):
    first = client.add_messages("chat-1", CHAT)
    assert first.conversation_id == "chat-1"
    assert (first.kept, first.refused) == (2, 0)
    assert [m.message_id for m in first.messages] == ["m1", "m2"]
    assert all(m.accepted and m.readable and not m.replayed for m in first.messages)
    again = client.add_messages("chat-1", CHAT)
    assert all(m.replayed for m in again.messages)
    assert [m.record_id for m in again.messages] == [m.record_id for m in first.messages]
    # A plain string is a user message.
    plain = client.add_messages("chat-2", ["I like green tea."])
    assert plain.kept == 1
    memory = client.get(plain.messages[0].record_id)
    assert memory.content == "user: I like green tea."
    assert memory.kind == "episodic"


def test_add_messages_skips_turns_without_text_and_keeps_the_rest(client):
    result = client.add_messages(
        "chat-tools",
        [
            {"role": "user", "content": "Which trains run to Bergen?"},
            {"role": "assistant", "content": ""},
            {"role": "assistant", "content": "The 08:25 and the 15:57."},
        ],
    )
    assert (result.kept, result.refused) == (2, 0)
    assert [(s.index, s.reason) for s in result.skipped] == [(1, "empty_content")]
    assert [m.index for m in result.messages] == [0, 2]


def test_fact_search_get_list_history_delete_and_verify(client, principal):
    ingest = client.add_messages("chat-1", CHAT)
    fact = client.add_fact("I moved to Berlin", [("chat-1", "m1")])
    assert fact.accepted, fact.violations
    assert fact.readable and fact.line_generation == 1

    found = client.search("where did the user move", kinds=["semantic"])
    assert found.record_ids == [fact.record_id]
    hit = found.hits[0]
    # A hit carries what a caller shows: the content, kind and a float score
    # (the server's fixed-point relevance divided by its scale).
    assert hit.content == "I moved to Berlin" and hit.kind == "semantic"
    assert isinstance(hit.score, float) and 0.0 < hit.score < 1_000.0
    assert hit.in_context and hit.created_at_unix_ms > 0
    assert "Berlin" in found.context
    assert found.decisions == []

    explained = client.explain("where does the user live")
    assert explained.decisions, "explain lists one decision per candidate"
    assert {d["record_id"] for d in explained.decisions} >= {fact.record_id, ingest.messages[0].record_id}

    memory = client.get(fact.record_id)
    assert memory.content == "I moved to Berlin"
    assert memory.kind == "semantic" and memory.active
    assert memory.subject == {"type": "principal", "principal_id": principal["principal"]}

    listed = {m.record_id: m for m in client.list()}
    assert set(listed) == {fact.record_id} | {m.record_id for m in ingest.messages}
    assert listed[fact.record_id].kind == "semantic"

    assert client.verify(fact).valid
    assert client.verify(memory).valid

    before = client.history(fact.record_id)
    assert before.memory is not None and before.deletion is None
    assert before.record is not None and before.record["record_id"] == fact.record_id
    assert before.audit_trail, "the record's audit events"

    deletion = client.delete(fact.record_id)
    assert deletion.record_id == fact.record_id
    assert deletion.finalized, deletion.stage
    verdict = client.verify(deletion.receipt)
    assert verdict.valid, verdict.problem
    # The Deletion itself is accepted too: verify() takes its receipt.
    assert client.verify(deletion).valid
    forged = dict(deletion.receipt.to_json())
    forged["receipt_sha256"] = "0" * 64
    assert not client.verify(forged).valid

    after = client.history(fact.record_id)
    assert after.deletion is not None and after.deletion.finalized
    assert fact.record_id not in client.search("Berlin").record_ids


def test_a_paraphrase_is_refused_with_the_gates_reasons(client):
    client.add_messages("chat-1", CHAT)
    refused = client.add_fact("The user lives in Germany", [("chat-1", "m1")])
    assert not refused.accepted
    assert refused.violations and all(v.code for v in refused.violations)


def test_delete_all_returns_every_receipt(client):
    ingest = client.add_messages("chat-1", CHAT)
    client.add_fact("I moved to Berlin", [("chat-1", "m1")])
    erasure = client.delete_all()
    assert erasure.complete
    assert len(erasure.deletions) == 3
    assert len(erasure.receipts) == 3
    assert all(client.verify(r).valid for r in erasure.receipts)
    assert erasure.consents_withdrawn
    assert client.search("Berlin").record_ids == []
    with pytest.raises(NotFoundError):
        client.get(ingest.messages[0].record_id).content  # noqa: B018


def test_errors_are_typed_and_carry_the_servers_code(server, client):
    with pytest.raises(AuthenticationError) as e:
        Mosaic("mk_not-a-key", server.url).search("x")
    assert e.value.code == "invalid_key" and e.value.status == 401
    with pytest.raises(AuthenticationError) as e:
        Mosaic("", server.url).search("x")
    assert e.value.code == "missing_key"
    with pytest.raises(NotFoundError) as e:
        client.get("no-such-record")
    assert e.value.code == "not_found"
    with pytest.raises(BadRequestError) as e:
        client.add_messages("bad id with spaces", CHAT)
    assert e.value.code == "invalid_identifier"
    with pytest.raises(PermissionDeniedError) as e:
        client.search("x", workspace_id="not-granted")
    assert e.value.status == 403 and e.value.code
    client.add_messages("chat-1", CHAT)
    with pytest.raises(ConflictError) as e:
        client.add_messages("chat-1", [{"id": "m1", "role": "user", "content": "something else"}])
    assert e.value.code == "message_id_in_use"
    # The admin key reads no memory.
    with pytest.raises(MosaicError) as e:
        Mosaic(server.admin_key, server.url).search("x")
    assert e.value.status == 403
    with pytest.raises(ValueError):
        client.add_messages("chat-1", [{"role": "user", "content": "x", "tenant_id": "other"}])


def test_an_unreachable_server_is_a_connection_error():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ConnectionFailed) as e:
        Mosaic("mk_x", f"http://127.0.0.1:{port}", timeout=2).search("x")
    assert e.value.code == "connection" and e.value.status is None


def test_user_id_is_sent_only_when_given(server, principal):
    seen = []

    def record(request):
        seen.append(request.headers.get("X-Mosaic-User"))

    import httpx

    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {principal['key']}"}, event_hooks={"request": [record]})
    client = Mosaic(http_client=http)
    client.whoami()
    assert seen == [None]
    # A principal key acting for another user: whatever the server says,
    # the client sent the header and raised a typed error or succeeded.
    try:
        client.whoami(user_id="end-user-7")
    except MosaicError:
        pass
    assert seen[-1] == "end-user-7"


def test_a_retry_waits_what_retry_after_says():
    from mosaic_memory.client import MAX_RETRY_AFTER, _backoff, _retry_pause

    assert _retry_pause(0, {"retry-after": "3"}) == 3.0
    assert _retry_pause(0, {"retry-after": "7200"}) == MAX_RETRY_AFTER
    for unusable in ({}, {"retry-after": "soon"}, {"retry-after": "-1"}, None):
        assert _retry_pause(2, unusable) == _backoff(2)


def test_rate_limited_requests_are_retried_then_raise_a_typed_error():
    from mosaic_test_server import MosaicServer, fresh_principal

    from mosaic_memory import RateLimitedError

    slow = MosaicServer(["--rate-limit-per-second", "1", "--rate-limit-burst", "2"])
    try:
        key = fresh_principal(slow, consent=False)["key"]
        impatient = Mosaic(key, slow.url, max_retries=0)
        with pytest.raises(RateLimitedError) as e:
            for _ in range(5):
                impatient.whoami()
        assert e.value.code == "rate_limited" and e.value.status == 429
        # The server says when to come back.
        raw = httpx.get(f"{slow.url}/v1/whoami", headers={"Authorization": f"Bearer {key}"})
        assert raw.status_code == 429 and int(raw.headers["retry-after"]) >= 1
        # A patient client waits the bucket out (1 token a second).
        patient = Mosaic(key, slow.url, max_retries=5)
        for _ in range(3):
            assert patient.whoami()["credential"]["role"] == "principal"
    finally:
        slow.stop()


def test_an_admin_key_creates_a_tenant_and_a_key_that_works(server):
    with Mosaic(server.admin_key, server.url) as admin:
        tenant = f"admin-made-{id(admin)}"
        created = admin.create_tenant(tenant)
        assert created["tenant_id"] == tenant
        issued = admin.create_key(tenant, "sam", grant={"allowed_workspace_ids": ["ws-1"]})
        assert issued["tenant_id"] == tenant and issued["principal_id"] == "sam"
        assert issued["key"] and issued["key"] != server.admin_key
    with Mosaic(issued["key"], server.url) as sam:
        assert sam.whoami()["credential"]["principal_id"] == "sam"
        sam.add_messages("chat-1", ["I'm Sam and I like green tea."])
        assert "green tea" in sam.search("tea").context


def test_a_principal_key_cannot_create_tenants(client):
    with pytest.raises(PermissionDeniedError):
        client.create_tenant("not-allowed")


def test_verify_checks_the_write_receipt_and_signature_held(client):
    client.add_messages("chat-1", CHAT)
    fact = client.add_fact("I moved to Berlin", [("chat-1", "m1")])
    assert fact.accepted, fact.violations
    signature = fact.raw["receipt_signature"]
    # verify() sends the receipt and signature the write answered.
    held = client.verify_write(fact.proposal_id, receipt=fact.receipt, receipt_signature=signature)
    assert held.valid and held.problem is None
    assert client.verify(fact).valid
    # A flipped signature digit, a changed receipt, a missing signature.
    flipped = dict(signature, signature_hex=("1" if signature["signature_hex"][0] == "0" else "0") + signature["signature_hex"][1:])
    verdict = client.verify_write(fact.proposal_id, receipt=fact.receipt, receipt_signature=flipped)
    assert not verdict.valid and verdict.problem.startswith("write signature: the signature does not verify"), verdict
    changed = dict(fact.receipt, judgments_sha256="0" * 64)
    verdict = client.verify_write(fact.proposal_id, receipt=changed, receipt_signature=signature)
    assert not verdict.valid and "does not match the canonical body" in verdict.problem, verdict
    verdict = client.verify_write(fact.proposal_id, receipt=fact.receipt)
    assert not verdict.valid and verdict.problem == "the write receipt carries no signature", verdict
    # A signature without the receipt it signs is a malformed request.
    with pytest.raises(BadRequestError) as e:
        client.verify_write(fact.proposal_id, receipt_signature=signature)
    assert e.value.code == "invalid_field"


def test_verify_refuses_a_deletion_without_receipt_clearly(client):
    from mosaic_memory.types import Deletion

    pending = Deletion.from_json({"record_id": "r1", "stage": "requested", "revocation_generation": 1})
    with pytest.raises(MosaicError) as e:
        client.verify(pending)
    assert e.value.code == "deletion_not_finalized"
