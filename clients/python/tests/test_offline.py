"""Receipts checked offline (mosaic_memory.offline) against a real `mosaic
serve`: every receipt the server returns verifies from itself and the
published keys, and changing any signed field or the signature fails."""

import copy
import hashlib
import json

import pytest

pytest.importorskip("cryptography")

from mosaic_memory import Mosaic  # noqa: E402
from mosaic_memory.offline import (  # noqa: E402
    OfflineVerdict,
    ReceiptFormatError,
    canonical_json,
    key_id,
    load_public_keys,
    verify_receipt,
)

CHAT = [
    {"id": "m1", "role": "user", "name": "Vinay", "created_at": "2026-05-01", "content": "I moved to Berlin last month."},
]


def leaf_paths(value, prefix):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaf_paths(v, prefix + [k])
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from leaf_paths(v, prefix + [i])
    else:
        yield prefix


def changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        if len(value) in (64, 128) and all(c in "0123456789abcdef" for c in value):
            return ("1" if value[0] == "0" else "0") + value[1:]
        return value + "x"
    if value is None:
        return "0" * 64
    if isinstance(value, list):
        return ["x"]
    return {"x": 1}


def every_mutation_fails(doc, members, keys):
    tried = 0
    for member in members:
        assert doc.get(member) is not None, member
        for path in leaf_paths(doc[member], [member]):
            forged = copy.deepcopy(doc)
            parent = forged
            for step in path[:-1]:
                parent = parent[step]
            parent[path[-1]] = changed(parent[path[-1]])
            try:
                verdict = verify_receipt(forged, keys)
            except ReceiptFormatError:
                continue
            finally:
                tried += 1
            assert not verdict.valid, f"changing {path} still verifies"
    return tried


@pytest.fixture
def client(server, principal):
    with Mosaic(principal["key"], server.url) as c:
        yield c


def test_every_receipt_verifies_offline_and_every_change_fails(server, client):
    keys = client.receipt_keys()
    assert keys["keys"][0]["key_id"] == keys["current_key_id"]
    client.add_messages("chat-offline", CHAT)
    fact = client.add_fact("I moved to Berlin", [("chat-offline", "m1")])
    assert fact.accepted, fact.violations

    write = fact.raw
    assert verify_receipt(write, keys) == OfflineVerdict(valid=True, checked=["write"])
    assert every_mutation_fails(write, ["receipt", "receipt_signature"], keys) >= 19

    recall = client.search("Berlin").raw
    assert verify_receipt(recall, keys) == OfflineVerdict(valid=True, checked=["selection", "relevance"])
    every_mutation_fails(recall, ["selection_receipt", "relevance_receipt", "selection_signature", "relevance_signature"], keys)
    swapped = dict(recall, selection_signature=recall["relevance_signature"])
    assert not verify_receipt(swapped, keys).valid

    # A deletion whose authority names non-ASCII and control characters:
    # the canonical bytes here must be the server's.
    deleted = client.delete(fact.record_id, authority_ref="tïcket\u0001\t\u2028 😀 \"q\" \\")
    assert deleted.finalized, deleted.raw
    assert verify_receipt(deleted.raw, keys) == OfflineVerdict(valid=True, checked=["deletion"])
    assert verify_receipt(deleted.receipt.to_json(), keys).valid
    every_mutation_fails(deleted.raw, ["deletion_receipt"], keys)
    # The server agrees, and refuses the receipt without its signature.
    assert client.verify_deletion(deleted.receipt).valid
    unsigned = {k: v for k, v in deleted.receipt.to_json().items() if k != "signature"}
    assert not client.verify_deletion(unsigned).valid

    head = server.admin.get("/v1/admin/audit/head").json()
    assert verify_receipt(head, keys) == OfflineVerdict(valid=True, checked=["audit_head"])
    every_mutation_fails(head, ["seq", "sha256", "signature"], keys)

    # Keys as hex lines work alike; another server's key verifies nothing.
    lines = "\n".join(k["public_key_hex"] for k in keys["keys"])
    assert verify_receipt(write, lines).valid
    stranger = hashlib.sha256(b"another server").hexdigest()
    for doc in (write, recall, deleted.raw, head):
        try:
            verdict = verify_receipt(doc, [stranger])
        except ReceiptFormatError:
            continue
        assert not verdict.valid and "no published key" in verdict.problem


def test_keys_whose_id_does_not_match_are_refused_and_documents_without_receipts_are_errors(client):
    keys = client.receipt_keys()
    forged = copy.deepcopy(keys)
    forged["keys"][0]["key_id"] = "rk-" + "0" * 32
    with pytest.raises(ReceiptFormatError):
        load_public_keys(forged)
    assert set(load_public_keys(json.dumps(keys))) == {keys["current_key_id"]}
    with pytest.raises(ReceiptFormatError):
        verify_receipt({"hello": "world"}, keys)


def test_the_documented_golden_vector():
    # docs/ENCODING.md, "Receipt signatures": the same bytes, key id and
    # signature the Rust core pins.
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    from mosaic_memory.offline import signing_bytes

    secret = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    public = secret.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert key_id(public) == "rk-56475aa75463474c0285df5dbf2bcab7"
    digest = hashlib.sha256(b"").hexdigest()
    message = signing_bytes("selection", key_id(public), digest)
    assert message == b'mosaic.receipt.signature.v1\n{"key_id":"rk-56475aa75463474c0285df5dbf2bcab7","kind":"selection","receipt_sha256":"' + digest.encode() + b'"}'
    assert secret.sign(message).hex() == (
        "c263acf9812883151cda126ca531e50acfbf50e1c27ac2e3665211b6d5d3eb97"
        "1ea8797616ce64400e2a9e8d54d86aacad77eb4f68dfc8328f4c70bc62a05904"
    )
    # Canonical strings escape as JSON.stringify does.
    assert canonical_json({"b": "\u0001\u2028é", "a": [1, None, True]}) == '{"a":[1,null,true],"b":"\\u0001\u2028é"}'.encode()
