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


def with_changed(doc, path):
    """A copy of `doc` with the leaf at `path` changed (`changed`)."""
    forged = copy.deepcopy(doc)
    parent = forged
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = changed(parent[path[-1]])
    return forged


def every_mutation_fails(doc, members, keys):
    tried = 0
    for member in members:
        assert doc.get(member) is not None, member
        for path in leaf_paths(doc[member], [member]):
            forged = with_changed(doc, path)
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
    # The write signature tells when it was made, inside the signed bytes
    # (so every_mutation_fails below changes it too).
    assert isinstance(write["receipt_signature"]["signed_at_unix_ms"], int)
    assert verify_receipt(write, keys) == OfflineVerdict(valid=True, checked=["write"])
    assert every_mutation_fails(write, ["receipt", "receipt_signature"], keys) >= 19
    # The memory's history carries the same receipt, signed alike.
    history = client.history(fact.record_id).record
    assert history["write_receipt"] == write["receipt"]
    assert verify_receipt(history, keys) == OfflineVerdict(valid=True, checked=["write"])
    assert every_mutation_fails(history, ["write_receipt", "write_receipt_signature"], keys) >= 19

    recall = client.search("Berlin").raw
    # A v5 selection receipt: the read scopes' roots in place of a digest
    # of every record decided on, and the decisions committed to by their
    # exceptions alone; its relevance receipt names the eligible set by the
    # same roots (v2).
    assert "record_set_sha256" not in recall["selection_receipt"]
    assert "decisions_sha256" not in recall["selection_receipt"]
    assert len(recall["selection_receipt"]["exceptions_sha256"]) == 64
    assert len(recall["selection_receipt"]["scope_commitments"]) == 4
    assert "eligible_set_sha256" not in recall["relevance_receipt"]
    assert len(recall["relevance_receipt"]["eligible_scopes_sha256"]) == 64
    assert isinstance(recall["selection_signature"]["signed_at_unix_ms"], int)
    assert isinstance(recall["relevance_signature"]["signed_at_unix_ms"], int)
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
    # A v2 receipt: the record's leaf as revoked, in the scope root its
    # revocation made, proven against that root.
    body = deleted.raw["deletion_receipt"]["body"]
    assert body["schema_version"] == 2
    assert set(body["revoked_leaf"]) == {"commitment", "record_sha256", "proof"}
    assert len(body["revoked_leaf"]["proof"]["path"]) == 10
    # The server agrees, and refuses the receipt without its signature.
    assert client.verify_deletion(deleted.receipt).valid
    unsigned = {k: v for k, v in deleted.receipt.to_json().items() if k != "signature"}
    assert not client.verify_deletion(unsigned).valid

    # Read again, the deletion comes with its audit event proven in a
    # signed tree head issued after it.
    again = client.deletion(fact.record_id).raw
    assert verify_receipt(again, keys) == OfflineVerdict(valid=True, checked=["deletion", "audit_head", "inclusion_proof"])
    assert every_mutation_fails(again, ["deletion_receipt", "audit_proof"], keys) >= 30
    moved = copy.deepcopy(again)
    moved["audit_proof"]["event"]["ref_id"] = "another-record"
    assert not verify_receipt(moved, keys).valid

    head = server.admin.get("/v1/admin/audit/head").json()
    assert verify_receipt(head, keys) == OfflineVerdict(valid=True, checked=["audit_head"])
    every_mutation_fails(head, ["tree_size", "root_sha256", "timestamp_unix_ms", "seq", "sha256", "signature"], keys)

    # Every event is in the signed tree; each proof step, size, root and
    # the signature matter.
    size = head["tree_size"]
    for seq in (1, size // 2, size):
        answer = server.admin.get(f"/v1/admin/audit/proof/inclusion?seq={seq}").json()
        assert verify_receipt(answer, keys) == OfflineVerdict(valid=True, checked=["audit_head", "inclusion_proof"])
        assert every_mutation_fails(answer, ["head", "inclusion_proof"], keys) >= 10

    # The log grows (a consent is an audit event); the kept head is a
    # prefix of the new one.
    client.give_consent(consent_id="consent-offline-tree")
    answer = server.admin.get(f"/v1/admin/audit/proof/consistency?first_size={size}").json()
    assert answer["head"]["tree_size"] > size
    doc = {"first_head": head, "head": answer["head"], "consistency_proof": answer["consistency_proof"]}
    assert verify_receipt(doc, keys) == OfflineVerdict(valid=True, checked=["audit_head", "consistency_proof"])
    assert every_mutation_fails(doc, ["first_head", "head", "consistency_proof"], keys) >= 14
    swapped = dict(doc, first_head=answer["head"], head=head)
    assert not verify_receipt(swapped, keys).valid

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


# The RFC 6962 reference leaves and trees (Certificate Transparency's and
# transparency-dev/merkle's reference tests), checked with hashlib alone.
RFC_LEAVES = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"]
RFC_ROOTS = {
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}


def test_rfc_6962_reference_proofs_verify_and_every_change_fails():
    from mosaic_memory.offline import leaf_hash, verify_consistency, verify_inclusion

    leaves = [leaf_hash(bytes.fromhex(x)) for x in RFC_LEAVES]
    root = {n: bytes.fromhex(h) for n, h in RFC_ROOTS.items()}
    h = lambda *xs: [bytes.fromhex(x) for x in xs]  # noqa: E731
    inclusion = [
        (8, 0, h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                 "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                 "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")),
        (8, 5, h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                 "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                 "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")),
        (5, 1, h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                 "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                 "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")),
        (2, 1, h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d")),
        (1, 0, []),
    ]
    for size, index, proof in inclusion:
        assert verify_inclusion(leaves[index], index, size, proof, root[size])
        for i in range(len(proof)):
            bad = list(proof)
            bad[i] = bytes([bad[i][0] ^ 1]) + bad[i][1:]
            assert not verify_inclusion(leaves[index], index, size, bad, root[size])
        assert not verify_inclusion(leaves[index], index + 1, size, proof, root[size])
        assert not verify_inclusion(leaves[index], index, size, proof + [root[size]], root[size])
        assert not verify_inclusion(leaves[(index + 1) % 8], index, size, proof, root[size])
    consistency = [
        (1, 8, h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                 "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                 "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")),
        (2, 5, h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                 "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")),
        (6, 8, h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                 "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                 "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")),
    ]
    for m, n, proof in consistency:
        assert verify_consistency(m, n, root[m], root[n], proof)
        for i in range(len(proof)):
            bad = list(proof)
            bad[i] = bytes([bad[i][0] ^ 1]) + bad[i][1:]
            assert not verify_consistency(m, n, root[m], root[n], bad)
        assert not verify_consistency(m, n, root[n], root[n], proof)
        assert not verify_consistency(m, n, root[m], root[m], proof)
        assert not verify_consistency(m, n, root[m], root[n], proof[:-1])
    assert verify_consistency(8, 8, root[8], root[8], [])
    assert not verify_consistency(0, 8, root[8], root[8], [])


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
    # The audit tree head's digest and signature (docs/ENCODING.md).
    from mosaic_memory.offline import AUDIT_TREE_HEAD_DOMAIN, domain_digest

    head = {
        "tree_size": 8,
        "root_sha256": "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
        "timestamp_unix_ms": 1700000000000,
        "chain_sha256": digest,
    }
    head_digest = domain_digest(AUDIT_TREE_HEAD_DOMAIN, head)
    assert head_digest == "ed8c2e75064635248bbab181e3ee83411911414a9d01bb2387cafa228b809fac"
    assert secret.sign(signing_bytes("audit_head", key_id(public), head_digest)).hex() == (
        "add5f342d7c9a66c8e0f8a292eebf709536a8aa341277da26795c52fd4614e00"
        "bccac90ecbc4bca13f2c64e83c9308fe533d4dbf7b6fe4d54a70e6c0ffdbdb02"
    )
    # A signature that tells its signing instant (v2).
    dated = signing_bytes("write", key_id(public), digest, 1700000000000)
    assert dated == (
        b'mosaic.receipt.signature.v2\n{"key_id":"rk-56475aa75463474c0285df5dbf2bcab7","kind":"write","receipt_sha256":"'
        + digest.encode()
        + b'","signed_at_unix_ms":1700000000000}'
    )
    assert secret.sign(dated).hex() == (
        "455a9a3919e445b4e9b6a3609036204f40f66f3d4209e9ed668719e9c20f49a6"
        "40fe0f67b1b92d642ee490295a7c3933f5c05bea3820d0df0a115f56c72a9c00"
    )
    # Canonical strings escape as JSON.stringify does.
    assert canonical_json({"b": "\u0001\u2028é", "a": [1, None, True]}) == '{"a":[1,null,true],"b":"\\u0001\u2028é"}'.encode()


def test_the_documented_scope_commitment_vectors_and_every_change_of_a_proof_fails():
    # docs/ENCODING.md, "Read scope commitments": the bytes, hashes, buckets,
    # root and proof the Rust core pins.
    from mosaic_memory.offline import (
        SCOPE_BUCKETS,
        node_hash,
        scope_bucket,
        scope_bucket_hash,
        scope_entry_hash,
        verify_scope_inclusion,
    )

    a = {"record_id": "rec-a", "record_sha256": hashlib.sha256(b"a").hexdigest(), "state": "active"}
    b = {"record_id": "rec-b", "record_sha256": hashlib.sha256(b"b").hexdigest(), "state": "revoked"}
    assert scope_entry_hash(a).hex() == "f552fa2f0ea68ad3ecb817be44b8d3d969e5ce4009c08685808eddc8a364bedf"
    assert scope_entry_hash(b).hex() == "670ac0dfbd4cc287690868f191e615c8df8ee987f6d6ef9aae7b2bcef6f745f6"
    assert (scope_bucket("rec-a"), scope_bucket("rec-b")) == (227, 554)
    level = [scope_bucket_hash([scope_entry_hash(e) for e in (a, b) if scope_bucket(e["record_id"]) == n]) for n in range(SCOPE_BUCKETS)]
    assert level[0].hex() == "2fdee5f298e133fbb7129ec04f1d4d3b41aee035d9db7b65ae2b9922a03fed4e"
    path, index = [], 227
    while len(level) > 1:
        path.append(level[index ^ 1])
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        index >>= 1
    root = level[0].hex()
    assert root == "f40c0dc5aea8359d0faeec280f03435a39117ffdaffc1dc7fbf14989c0387e12"
    proof = {"bucket": 227, "position": 0, "bucket_entries": [scope_entry_hash(a).hex()], "path": [p.hex() for p in path]}
    assert proof["path"][1] == "03acc832fce0b5e5da11b5413245cfefdf5be5aacdd427ef2d2010d5c6ee30d3"
    assert verify_scope_inclusion(a, proof, root)
    tried = 0
    for path_ in leaf_paths(proof, []):
        forged = with_changed(proof, path_)
        tried += 1
        assert not verify_scope_inclusion(a, forged, root), path_
    assert tried == 13
    assert not verify_scope_inclusion(dict(a, state="revoked"), proof, root)
    assert not verify_scope_inclusion(b, proof, root)
    assert not verify_scope_inclusion(a, proof, changed(root))


def test_a_recalled_memory_proves_its_place_in_the_bound_scope(client):
    from mosaic_memory.offline import scope_entry, verify_scope_inclusion

    client.add_messages("chat-scope", CHAT)
    fact = client.add_fact("I moved to Berlin", [("chat-scope", "m1")])
    assert fact.accepted, fact.violations
    receipt = client.search("Berlin").raw["selection_receipt"]
    commitments = receipt["scope_commitments"]
    assert len(commitments) == 4
    memory = client.get(fact.record_id)
    entry = scope_entry(memory.record, memory.state)
    scope = memory.record["subject"]["type"]
    roots = [c["root_sha256"] for c in commitments if c["scope"]["type"] == scope]
    answer = client._http.get(f"/v1/memories/{fact.record_id}/inclusion", params={"root_sha256": roots[0]}).json()
    assert answer["entry"] == entry
    assert verify_scope_inclusion(entry, answer["proof"], roots[0])


def test_the_documented_v4_selection_receipt_and_its_neighbours():
    # docs/ENCODING.md, "Selection receipts that bind the scope roots (v4)":
    # the body the Rust core pins hashes to the documented digest under the
    # tag its members call for; the same body under another tag, or with
    # its roots stripped, is another receipt.
    from mosaic_memory.offline import (
        SELECTION_RECEIPT_V3_DOMAIN,
        SELECTION_RECEIPT_V4_DOMAIN,
        domain_digest,
        selection_receipt_domain,
    )

    body = json.loads('{"decision_counts":{"decided":8,"dropped":{"expired":1,"revoked":1,"subject_mismatch":2},"selected":4},"decisions_sha256":"c5c8e331b07e146ccae7c4b6d9d460e0fa301a3731f5146b5a62d3700d31a7d2","ordering":"kind_recency","read_context_sha256":"5754c13ffd0c9e38f65bd6a5139d252825bce540e670196d128a682bb27decef","relevance_receipt_sha256":null,"schema_version":1,"scope_commitments":[{"generation":1,"root_sha256":"8a65d17c2f070c75f37aaae29609a2ff7a066fe7c372028d2b81e8aa6d733728","scope":{"run_id":"run-current","type":"run"}},{"generation":3,"root_sha256":"d0f063e19e347992d07d7ad217c7d6c195d72e75d5103db8f23320959436d368","scope":{"principal_id":"user-vinay","type":"principal"}},{"generation":0,"root_sha256":"3c0f5abb75db991b42b756f99ec1c3d4e259af5ae4f42f15c9b8f18c66925f00","scope":{"principal_id":"user-vinay","type":"principal_in_workspace","workspace_id":"ws-rust"}},{"generation":2,"root_sha256":"c0e269d89cf48f4f38cb6d1007b9e854548fd4d74c5b54e04487ee5d22519f09","scope":{"type":"workspace","workspace_id":"ws-rust"}}],"selected_record_ids":["working-current","semantic-user","procedure-build","episode-user"],"selector_release":"memory-scope-v1"}')
    assert selection_receipt_domain(body) == SELECTION_RECEIPT_V4_DOMAIN
    assert canonical_json(body) == '{"decision_counts":{"decided":8,"dropped":{"expired":1,"revoked":1,"subject_mismatch":2},"selected":4},"decisions_sha256":"c5c8e331b07e146ccae7c4b6d9d460e0fa301a3731f5146b5a62d3700d31a7d2","ordering":"kind_recency","read_context_sha256":"5754c13ffd0c9e38f65bd6a5139d252825bce540e670196d128a682bb27decef","relevance_receipt_sha256":null,"schema_version":1,"scope_commitments":[{"generation":1,"root_sha256":"8a65d17c2f070c75f37aaae29609a2ff7a066fe7c372028d2b81e8aa6d733728","scope":{"run_id":"run-current","type":"run"}},{"generation":3,"root_sha256":"d0f063e19e347992d07d7ad217c7d6c195d72e75d5103db8f23320959436d368","scope":{"principal_id":"user-vinay","type":"principal"}},{"generation":0,"root_sha256":"3c0f5abb75db991b42b756f99ec1c3d4e259af5ae4f42f15c9b8f18c66925f00","scope":{"principal_id":"user-vinay","type":"principal_in_workspace","workspace_id":"ws-rust"}},{"generation":2,"root_sha256":"c0e269d89cf48f4f38cb6d1007b9e854548fd4d74c5b54e04487ee5d22519f09","scope":{"type":"workspace","workspace_id":"ws-rust"}}],"selected_record_ids":["working-current","semantic-user","procedure-build","episode-user"],"selector_release":"memory-scope-v1"}'.encode()
    assert domain_digest(SELECTION_RECEIPT_V4_DOMAIN, body) == 'fec39410590c814ea6407fb3cfa44ba018e6a177f7c3ea2f12c1d72c62ebd66c'
    with_set = dict(body, record_set_sha256="ab" * 32)
    assert selection_receipt_domain(with_set) == SELECTION_RECEIPT_V3_DOMAIN
    stripped = {k: v for k, v in body.items() if k != "scope_commitments"}
    assert selection_receipt_domain(stripped) is None
    assert selection_receipt_domain(dict(body, scope_commitments=[])) is None


def test_the_documented_v5_selection_receipt_and_its_neighbours():
    # docs/ENCODING.md, "Selection receipts v5": the body the Rust core pins
    # hashes to the documented digest under the tag its members call for;
    # the same body under v4's tag, with its exceptions digest under v4's
    # member name, or with members of two versions, is not a v5 receipt.
    from mosaic_memory.offline import (
        RELEVANCE_RECEIPT_DOMAIN,
        RELEVANCE_RECEIPT_V2_DOMAIN,
        SELECTION_RECEIPT_V4_DOMAIN,
        SELECTION_RECEIPT_V5_DOMAIN,
        domain_digest,
        relevance_receipt_domain,
        selection_receipt_domain,
    )

    body = json.loads('{"decision_counts":{"decided":8,"dropped":{"expired":1,"revoked":1,"subject_mismatch":2},"selected":4},"exceptions_sha256":"15a3f8d932d8a5ce3849462861549a96efb83f00544efb08a3f6fc22c22fcbd5","ordering":"kind_recency","read_context_sha256":"5754c13ffd0c9e38f65bd6a5139d252825bce540e670196d128a682bb27decef","relevance_receipt_sha256":null,"schema_version":1,"scope_commitments":[{"generation":1,"root_sha256":"8a65d17c2f070c75f37aaae29609a2ff7a066fe7c372028d2b81e8aa6d733728","scope":{"run_id":"run-current","type":"run"}},{"generation":3,"root_sha256":"d0f063e19e347992d07d7ad217c7d6c195d72e75d5103db8f23320959436d368","scope":{"principal_id":"user-vinay","type":"principal"}},{"generation":0,"root_sha256":"3c0f5abb75db991b42b756f99ec1c3d4e259af5ae4f42f15c9b8f18c66925f00","scope":{"principal_id":"user-vinay","type":"principal_in_workspace","workspace_id":"ws-rust"}},{"generation":2,"root_sha256":"c0e269d89cf48f4f38cb6d1007b9e854548fd4d74c5b54e04487ee5d22519f09","scope":{"type":"workspace","workspace_id":"ws-rust"}}],"selected_record_ids":["working-current","semantic-user","procedure-build","episode-user"],"selector_release":"memory-scope-v1"}')
    assert selection_receipt_domain(body) == SELECTION_RECEIPT_V5_DOMAIN
    assert canonical_json(body) == '{"decision_counts":{"decided":8,"dropped":{"expired":1,"revoked":1,"subject_mismatch":2},"selected":4},"exceptions_sha256":"15a3f8d932d8a5ce3849462861549a96efb83f00544efb08a3f6fc22c22fcbd5","ordering":"kind_recency","read_context_sha256":"5754c13ffd0c9e38f65bd6a5139d252825bce540e670196d128a682bb27decef","relevance_receipt_sha256":null,"schema_version":1,"scope_commitments":[{"generation":1,"root_sha256":"8a65d17c2f070c75f37aaae29609a2ff7a066fe7c372028d2b81e8aa6d733728","scope":{"run_id":"run-current","type":"run"}},{"generation":3,"root_sha256":"d0f063e19e347992d07d7ad217c7d6c195d72e75d5103db8f23320959436d368","scope":{"principal_id":"user-vinay","type":"principal"}},{"generation":0,"root_sha256":"3c0f5abb75db991b42b756f99ec1c3d4e259af5ae4f42f15c9b8f18c66925f00","scope":{"principal_id":"user-vinay","type":"principal_in_workspace","workspace_id":"ws-rust"}},{"generation":2,"root_sha256":"c0e269d89cf48f4f38cb6d1007b9e854548fd4d74c5b54e04487ee5d22519f09","scope":{"type":"workspace","workspace_id":"ws-rust"}}],"selected_record_ids":["working-current","semantic-user","procedure-build","episode-user"],"selector_release":"memory-scope-v1"}'.encode()
    assert domain_digest(SELECTION_RECEIPT_V5_DOMAIN, body) == "db3845e43419d0b2febfe94f2e0af985f0e7d2ef691b111b50b9cc0a7dea1e73"
    assert domain_digest(SELECTION_RECEIPT_V4_DOMAIN, body) != "db3845e43419d0b2febfe94f2e0af985f0e7d2ef691b111b50b9cc0a7dea1e73"
    renamed = {("decisions_sha256" if k == "exceptions_sha256" else k): v for k, v in body.items()}
    assert selection_receipt_domain(renamed) == SELECTION_RECEIPT_V4_DOMAIN
    assert domain_digest(SELECTION_RECEIPT_V4_DOMAIN, renamed) != "db3845e43419d0b2febfe94f2e0af985f0e7d2ef691b111b50b9cc0a7dea1e73"
    assert selection_receipt_domain(dict(body, decisions_sha256="ab" * 32)) is None
    assert selection_receipt_domain(dict(body, record_set_sha256="ab" * 32)) is None
    assert selection_receipt_domain(dict(body, scope_commitments=[])) is None
    assert relevance_receipt_domain({"eligible_scopes_sha256": "ab" * 32}) == RELEVANCE_RECEIPT_V2_DOMAIN
    assert relevance_receipt_domain({"eligible_set_sha256": "ab" * 32}) == RELEVANCE_RECEIPT_DOMAIN
    assert relevance_receipt_domain({}) is None
    assert relevance_receipt_domain({"eligible_set_sha256": "ab" * 32, "eligible_scopes_sha256": "ab" * 32}) is None


def test_a_recall_whose_receipts_change_version_is_refused(client):
    # The server's v5 selection and v2 relevance receipts, relabelled as
    # the earlier versions (the same digest values under the earlier
    # members' names): each is refused by its digest, never accepted.
    keys = client.receipt_keys()
    client.add_messages("chat-relabel", CHAT)
    fact = client.add_fact("I moved to Berlin", [("chat-relabel", "m1")])
    assert fact.accepted, fact.violations
    recall = client.search("Berlin").raw
    assert verify_receipt(recall, keys).valid
    as_v4 = copy.deepcopy(recall)
    selection = as_v4["selection_receipt"]
    selection["decisions_sha256"] = selection.pop("exceptions_sha256")
    verdict = verify_receipt(as_v4, keys)
    assert not verdict.valid
    assert "selection receipt_sha256 does not match" in verdict.problem
    as_v1 = copy.deepcopy(recall)
    relevance = as_v1["relevance_receipt"]
    relevance["eligible_set_sha256"] = relevance.pop("eligible_scopes_sha256")
    verdict = verify_receipt(as_v1, keys)
    assert not verdict.valid
    assert "relevance receipt_sha256 does not match" in verdict.problem
    both = copy.deepcopy(recall)
    both["selection_receipt"]["decisions_sha256"] = "ab" * 32
    verdict = verify_receipt(both, keys)
    assert not verdict.valid
    assert "two versions" in verdict.problem


def test_a_selection_receipt_binding_no_records_is_refused(client):
    # Stripped of its scope roots (and so binding no records at all), a
    # recall's selection receipt is refused before any signature is checked.
    keys = client.receipt_keys()
    client.add_messages("chat-unbound", CHAT)
    fact = client.add_fact("I moved to Berlin", [("chat-unbound", "m1")])
    assert fact.accepted, fact.violations
    recall = copy.deepcopy(client.search("Berlin").raw)
    del recall["selection_receipt"]["scope_commitments"]
    verdict = verify_receipt(recall, keys)
    assert not verdict.valid
    assert "neither a record set nor scope commitments" in verdict.problem


# ---------------------------------------------------------------- deletion v2 and key windows

GOLDEN_V2_DELETION_SHA256 = "0d2ec97dbdaf57c263ecf5597edb877d455c3a74f06ea3efd1602db800bd3bea"


def _test_key():
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    secret = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    public = secret.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return secret, public


def _keys_json(public, valid_from=0, valid_until=None):
    return {
        "current_key_id": key_id(public),
        "keys": [
            {
                "key_id": key_id(public),
                "algorithm": "ed25519",
                "public_key_hex": public.hex(),
                "valid_from_unix_ms": valid_from,
                "valid_until_unix_ms": valid_until,
            }
        ],
    }


def _golden_v2_body():
    """docs/ENCODING.md, "A deletion receipt that proves the revoked leaf":
    rec-b revoked in the scope holding rec-a (active) and rec-b."""
    from mosaic_memory.offline import SCOPE_BUCKETS, node_hash, scope_bucket, scope_bucket_hash, scope_entry_hash

    a = {"record_id": "rec-a", "record_sha256": hashlib.sha256(b"a").hexdigest(), "state": "active"}
    b = {"record_id": "rec-b", "record_sha256": hashlib.sha256(b"b").hexdigest(), "state": "revoked"}
    level = [scope_bucket_hash([scope_entry_hash(e) for e in (a, b) if scope_bucket(e["record_id"]) == n]) for n in range(SCOPE_BUCKETS)]
    path, index = [], 554
    while len(level) > 1:
        path.append(level[index ^ 1])
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        index >>= 1
    return {
        "schema_version": 2,
        "tombstone": {
            "record_id": "rec-b",
            "tenant_id": "tenant-a",
            "reason": {"reason": "requested"},
            "authorization": {"actor_id": "alice", "authority_ref": "ticket-1"},
            "revoked_at_unix_ms": 1700000000000,
            "erased_at_unix_ms": 1700000001000,
        },
        "revocation_generation": 1,
        "stores": [{"store": "primary", "acknowledged_generation": 1, "acknowledged_at_unix_ms": 1700000001000}],
        "backup_exception": None,
        "finalized_at_unix_ms": 1700000002000,
        "revoked_leaf": {
            "commitment": {"scope": {"type": "principal", "principal_id": "alice"}, "generation": 2, "root_sha256": level[0].hex()},
            "record_sha256": b["record_sha256"],
            "proof": {"bucket": 554, "position": 0, "bucket_entries": [scope_entry_hash(b).hex()], "path": [p.hex() for p in path]},
        },
    }


def _signed_deletion(body):
    from mosaic_memory.offline import deletion_receipt_domain, domain_digest, signing_bytes

    secret, public = _test_key()
    digest = domain_digest(deletion_receipt_domain(body), body)
    signature = {
        "kind": "deletion",
        "key_id": key_id(public),
        "receipt_sha256": digest,
        "signature_hex": secret.sign(signing_bytes("deletion", key_id(public), digest)).hex(),
    }
    return {"body": body, "receipt_sha256": digest, "signature": signature}


def test_the_documented_v2_deletion_receipt_and_every_change_of_its_leaf_fails():
    from mosaic_memory.offline import DELETION_RECEIPT_DOMAIN, DELETION_RECEIPT_V2_DOMAIN, domain_digest

    _, public = _test_key()
    keys = _keys_json(public)
    body = _golden_v2_body()
    assert body["revoked_leaf"]["commitment"]["root_sha256"] == "f40c0dc5aea8359d0faeec280f03435a39117ffdaffc1dc7fbf14989c0387e12"
    assert domain_digest(DELETION_RECEIPT_V2_DOMAIN, body) == GOLDEN_V2_DELETION_SHA256
    receipt = _signed_deletion(body)
    assert receipt["receipt_sha256"] == GOLDEN_V2_DELETION_SHA256
    assert verify_receipt({"deletion_receipt": receipt}, keys) == OfflineVerdict(valid=True, checked=["deletion"])
    # Every field changed after signing: the digest or the signature fails.
    assert every_mutation_fails({"deletion_receipt": receipt}, ["deletion_receipt"], keys) >= 30
    # Every step of the leaf's proof changed and the receipt signed again
    # (a server that lied): the leaf no longer leads to the signed root.
    leaf_changes = 0
    for path in leaf_paths(body["revoked_leaf"], []):
        if path[0] == "commitment" and path[1] != "root_sha256":
            continue  # scope and generation are signed claims, not proof steps
        forged = copy.deepcopy(body)
        parent = forged["revoked_leaf"]
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = changed(parent[path[-1]])
        verdict = verify_receipt({"deletion_receipt": _signed_deletion(forged)}, keys)
        assert not verdict.valid, path
        assert verdict.problem.startswith("revoked leaf"), (path, verdict.problem)
        leaf_changes += 1
    assert leaf_changes == 15
    # The record's entry as it was before, active: not the revoked leaf.
    from mosaic_memory.offline import scope_entry_hash

    active = copy.deepcopy(body)
    active["revoked_leaf"]["proof"]["bucket_entries"] = [
        scope_entry_hash({"record_id": "rec-b", "record_sha256": hashlib.sha256(b"b").hexdigest(), "state": "active"}).hex()
    ]
    assert not verify_receipt({"deletion_receipt": _signed_deletion(active)}, keys).valid
    # Another record's tombstone on this leaf.
    other = copy.deepcopy(body)
    other["tombstone"]["record_id"] = "rec-a"
    assert verify_receipt({"deletion_receipt": _signed_deletion(other)}, keys).problem.startswith("revoked leaf")
    # A v2 body under schema version 1, signed: refused.
    version = copy.deepcopy(body)
    version["schema_version"] = 1
    assert not verify_receipt({"deletion_receipt": _signed_deletion(version)}, keys).valid
    # v1 receipts (no leaf) verify as before, under the v1 tag.
    v1 = copy.deepcopy(body)
    del v1["revoked_leaf"]
    v1["schema_version"] = 1
    old = _signed_deletion(v1)
    assert old["receipt_sha256"] == domain_digest(DELETION_RECEIPT_DOMAIN, v1)
    assert verify_receipt(old, keys).valid
    # The leaf dropped from a signed v2 receipt: its digest no longer matches.
    stripped = copy.deepcopy(receipt)
    del stripped["body"]["revoked_leaf"]
    assert not verify_receipt(stripped, keys).valid


def _signed_head(at):
    from mosaic_memory.offline import AUDIT_TREE_HEAD_DOMAIN, domain_digest, signing_bytes

    secret, public = _test_key()
    head = {"tree_size": 3, "root_sha256": "7" * 64, "timestamp_unix_ms": at, "chain_sha256": "8" * 64}
    digest = domain_digest(AUDIT_TREE_HEAD_DOMAIN, head)
    return {
        "tree_size": 3,
        "root_sha256": head["root_sha256"],
        "timestamp_unix_ms": at,
        "seq": 3,
        "sha256": head["chain_sha256"],
        "signature": {
            "kind": "audit_head",
            "key_id": key_id(public),
            "receipt_sha256": digest,
            "signature_hex": secret.sign(signing_bytes("audit_head", key_id(public), digest)).hex(),
        },
    }


def test_a_signature_outside_its_keys_window_is_refused():
    _, public = _test_key()
    head = _signed_head(5000)
    assert verify_receipt(head, _keys_json(public, 5000)).valid
    assert verify_receipt(head, _keys_json(public, 1000, 5001)).valid
    early = verify_receipt(head, _keys_json(public, 5001))
    assert not early.valid and "before key" in early.problem and "became valid at 5001" in early.problem, early
    late = verify_receipt(head, json.dumps(_keys_json(public, 1000, 5000)))
    assert not late.valid and "was retired at 5000" in late.problem, late
    # Keys given as hex lines carry no window: the signature alone.
    assert verify_receipt(head, [public.hex()]).valid
    # A deletion receipt is signed when it is read, at or after its
    # finalization: a key current since later may sign it, a key retired
    # before it was finalized cannot have.
    deletion = {"deletion_receipt": _signed_deletion(_golden_v2_body())}
    assert verify_receipt(deletion, _keys_json(public, 1800000000000)).valid
    assert verify_receipt(deletion, _keys_json(public, 0, 1700000002001)).valid
    retired = verify_receipt(deletion, _keys_json(public, 0, 1700000002000))
    assert not retired.valid and retired.problem.startswith("deletion receipt signature"), retired
    # A window that is not a count is a malformed key set.
    bad = _keys_json(public)
    bad["keys"][0]["valid_from_unix_ms"] = "yesterday"
    with pytest.raises(ReceiptFormatError):
        verify_receipt(head, bad)


def _dated_write(at):
    from mosaic_memory.offline import WRITE_RECEIPT_DOMAIN, domain_digest, signing_bytes

    secret, public = _test_key()
    body = {"schema_version": 1, "decision": "accepted"}
    digest = domain_digest(WRITE_RECEIPT_DOMAIN, body)
    signature = {"kind": "write", "key_id": key_id(public), "receipt_sha256": digest}
    if at is not None:
        signature["signed_at_unix_ms"] = at
    signature["signature_hex"] = secret.sign(signing_bytes("write", key_id(public), digest, at)).hex()
    return {"receipt": dict(body, receipt_sha256=digest), "receipt_signature": signature}


def test_a_dated_signature_outside_its_keys_window_is_refused():
    _, public = _test_key()
    write = _dated_write(5000)
    assert verify_receipt(write, _keys_json(public, 5000)) == OfflineVerdict(valid=True, checked=["write"])
    assert verify_receipt(write, _keys_json(public, 1000, 5001)).valid
    early = verify_receipt(write, _keys_json(public, 5001))
    assert not early.valid and early.problem.startswith("write receipt signature: signed at 5000, before key"), early
    late = verify_receipt(write, _keys_json(public, 1000, 5000))
    assert not late.valid and "was retired at 5000" in late.problem, late
    # The instant is signed: changed, dropped or not a count, it fails.
    for changed_at in (4999, 5001):
        forged = copy.deepcopy(write)
        forged["receipt_signature"]["signed_at_unix_ms"] = changed_at
        verdict = verify_receipt(forged, _keys_json(public, 0))
        assert not verdict.valid and "does not verify" in verdict.problem, verdict
    dropped = copy.deepcopy(write)
    del dropped["receipt_signature"]["signed_at_unix_ms"]
    assert not verify_receipt(dropped, _keys_json(public, 0)).valid
    for bad in ("5000", -1, True, None):
        forged = copy.deepcopy(write)
        forged["receipt_signature"]["signed_at_unix_ms"] = bad
        verdict = verify_receipt(forged, _keys_json(public, 0))
        assert not verdict.valid and "malformed" in verdict.problem, (bad, verdict)
    # A signature made before signatures told their instant still verifies,
    # by its signature alone; adding an instant to it fails.
    undated = _dated_write(None)
    assert verify_receipt(undated, _keys_json(public, 5001, 5002)).valid
    dated = copy.deepcopy(undated)
    dated["receipt_signature"]["signed_at_unix_ms"] = 5001
    assert not verify_receipt(dated, _keys_json(public, 5001, 5002)).valid


# ---------------------------------------------------------------- an explained recall's decisions

GOLDEN_V5_SELECTION = json.loads('{"decision_counts":{"decided":8,"dropped":{"expired":1,"revoked":1,"subject_mismatch":2},"selected":4},"exceptions_sha256":"15a3f8d932d8a5ce3849462861549a96efb83f00544efb08a3f6fc22c22fcbd5","ordering":"kind_recency","read_context_sha256":"5754c13ffd0c9e38f65bd6a5139d252825bce540e670196d128a682bb27decef","relevance_receipt_sha256":null,"schema_version":1,"scope_commitments":[{"generation":1,"root_sha256":"8a65d17c2f070c75f37aaae29609a2ff7a066fe7c372028d2b81e8aa6d733728","scope":{"run_id":"run-current","type":"run"}},{"generation":3,"root_sha256":"d0f063e19e347992d07d7ad217c7d6c195d72e75d5103db8f23320959436d368","scope":{"principal_id":"user-vinay","type":"principal"}},{"generation":0,"root_sha256":"3c0f5abb75db991b42b756f99ec1c3d4e259af5ae4f42f15c9b8f18c66925f00","scope":{"principal_id":"user-vinay","type":"principal_in_workspace","workspace_id":"ws-rust"}},{"generation":2,"root_sha256":"c0e269d89cf48f4f38cb6d1007b9e854548fd4d74c5b54e04487ee5d22519f09","scope":{"type":"workspace","workspace_id":"ws-rust"}}],"selected_record_ids":["working-current","semantic-user","procedure-build","episode-user"],"selector_release":"memory-scope-v1"}')


def _golden_decisions():
    """The chapter 7 selection's eight decisions (docs/ENCODING.md,
    "Selection receipts v5"), sorted by record id."""

    def d(record_id, kind, outcome):
        return {"record_id": record_id, "kind": kind, "outcome": outcome}

    def dropped(reason):
        return {"decision": "dropped", "reason": reason}

    def selected(rank):
        return {"decision": "selected", "rank": rank}

    return [
        d("episode-expired", "episodic", dropped("expired")),
        d("episode-user", "episodic", selected(3)),
        d("procedure-build", "procedural", selected(2)),
        d("procedure-revoked", "procedural", dropped("revoked")),
        d("semantic-other", "semantic", dropped("subject_mismatch")),
        d("semantic-user", "semantic", selected(1)),
        d("working-current", "working", selected(0)),
        d("working-old", "working", dropped("subject_mismatch")),
    ]


def _signed_recall(selection, decisions):
    from mosaic_memory.offline import SELECTION_RECEIPT_V5_DOMAIN, domain_digest, signing_bytes

    secret, public = _test_key()
    digest = domain_digest(SELECTION_RECEIPT_V5_DOMAIN, selection)
    signature = {
        "kind": "selection",
        "key_id": key_id(public),
        "receipt_sha256": digest,
        "signature_hex": secret.sign(signing_bytes("selection", key_id(public), digest)).hex(),
    }
    return {
        "selection_receipt": dict(selection, receipt_sha256=digest),
        "selection_signature": signature,
        "decisions": decisions,
    }


def test_the_documented_decision_digests():
    from mosaic_memory.offline import decisions_digest, exceptions_digest

    decisions = _golden_decisions()
    # The digests the Rust core pins (memory_scope.json, docs/ENCODING.md).
    assert exceptions_digest(decisions) == "15a3f8d932d8a5ce3849462861549a96efb83f00544efb08a3f6fc22c22fcbd5"
    assert decisions_digest(decisions) == "c5c8e331b07e146ccae7c4b6d9d460e0fa301a3731f5146b5a62d3700d31a7d2"
    # The usual outcome is the most frequent drop, the smallest reason name
    # among equals: with one more expired record, expired and
    # subject_mismatch tie, and expired is the usual one.
    tied = decisions + [{"record_id": "x-expired", "kind": "episodic", "outcome": {"decision": "dropped", "reason": "expired"}}]
    assert exceptions_digest(tied) != exceptions_digest(decisions)


def test_an_explained_recalls_decisions_are_checked_against_the_signed_receipt():
    _, public = _test_key()
    keys = _keys_json(public)
    recall = _signed_recall(GOLDEN_V5_SELECTION, _golden_decisions())
    assert verify_receipt(recall, keys) == OfflineVerdict(valid=True, checked=["selection"])
    # The decisions outside the receipt (policy_mismatch, after its
    # decided ones) are not part of what it commits to.
    extra = copy.deepcopy(recall)
    extra["decisions"].append({"record_id": "a-other-policy", "kind": "semantic", "outcome": {"decision": "dropped", "reason": "policy_mismatch"}})
    assert verify_receipt(extra, keys).valid
    # Without the list there is nothing to check but the receipt.
    assert verify_receipt(dict(recall, decisions=[]), keys).valid

    # Every field of every decision the receipt names by its exceptions,
    # and the outcome of every decision, changed in turn (a kind or a drop
    # reason to each other one): refused.
    def alternatives(name, value):
        if name == "kind":
            return [k for k in ("working", "episodic", "semantic", "procedural") if k != value]
        if name == "reason":
            return [r for r in ("expired", "revoked", "subject_mismatch", "superseded") if r != value]
        return [changed(value)]

    exceptions = [i for i, d in enumerate(recall["decisions"]) if d["outcome"].get("reason") != "subject_mismatch"]
    paths = [["decisions", i] + p for i in exceptions for p in leaf_paths(recall["decisions"][i], [])]
    paths += [["decisions", i, "outcome", "reason"] for i, d in enumerate(recall["decisions"]) if i not in exceptions]
    tried = 0
    for path in paths:
        parent = recall
        for step in path[:-1]:
            parent = parent[step]
        for value in alternatives(path[-1], parent[path[-1]]):
            forged = copy.deepcopy(recall)
            target = forged
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = value
            tried += 1
            try:
                verdict = verify_receipt(forged, keys)
            except ReceiptFormatError:
                continue
            assert not verdict.valid, f"changing {path} to {value!r} still verifies"
    assert tried >= 30, tried
    # Each way a list can differ from the receipt's, with the Rust
    # verifier's words.
    cases = []
    swapped = copy.deepcopy(recall)
    swapped["decisions"][0], swapped["decisions"][1] = swapped["decisions"][1], swapped["decisions"][0]
    cases.append((swapped, "decisions are not sorted by record id without repeats"))
    dropped_one = copy.deepcopy(recall)
    dropped_one["decisions"][0]["outcome"] = {"decision": "dropped", "reason": "revoked"}
    cases.append((dropped_one, "decisions do not hash to the receipt's decisions_sha256"))
    renamed = copy.deepcopy(recall)
    renamed["decisions"][1]["record_id"] = "episode-user2"
    cases.append((renamed, "decisions do not hash to the receipt's decisions_sha256"))
    for doc, problem in cases:
        verdict = verify_receipt(doc, keys)
        assert (verdict.valid, verdict.problem) == (False, problem)
    # Decisions that hash right but do not add up, or do not select the
    # receipt's records at their ranks: the receipt (signed again here)
    # says otherwise.
    short = copy.deepcopy(GOLDEN_V5_SELECTION)
    short["decision_counts"] = {"decided": 8, "dropped": {"expired": 1, "revoked": 1, "subject_mismatch": 1, "superseded": 1}, "selected": 4}
    verdict = verify_receipt(_signed_recall(short, _golden_decisions()), keys)
    assert (verdict.valid, verdict.problem) == (False, "decisions do not add up to the receipt's decision_counts")
    reordered = copy.deepcopy(GOLDEN_V5_SELECTION)
    reordered["selected_record_ids"] = ["semantic-user", "working-current", "procedure-build", "episode-user"]
    verdict = verify_receipt(_signed_recall(reordered, _golden_decisions()), keys)
    assert (verdict.valid, verdict.problem) == (False, "selected record semantic-user is not decided selected at its rank")
    # A decision that is not one the API returns is a format error.
    for bad in ({"record_id": "x"}, {"record_id": "x", "kind": "lore", "outcome": {"decision": "dropped", "reason": "expired"}},
                {"record_id": "x", "kind": "working", "outcome": {"decision": "dropped", "reason": "bored"}},
                {"record_id": "x", "kind": "working", "outcome": {"decision": "selected", "rank": -1}}):
        with pytest.raises(ReceiptFormatError):
            verify_receipt(dict(recall, decisions=recall["decisions"] + [bad]), keys)


def test_a_live_explained_recall_verifies_and_every_change_of_its_decisions_fails(client):
    keys = client.receipt_keys()
    client.add_messages("chat-explained", CHAT)
    fact = client.add_fact("I moved to Berlin", [("chat-explained", "m1")])
    assert fact.accepted, fact.violations
    recall = client.explain("Berlin").raw
    assert recall["decisions"], recall
    assert verify_receipt(recall, keys) == OfflineVerdict(valid=True, checked=["selection", "relevance"])
    decided = recall["selection_receipt"]["decision_counts"]["decided"]
    selected = [i for i, d in enumerate(recall["decisions"][:decided]) if d["outcome"]["decision"] == "selected"]
    assert selected
    # Every field of each selected decision (an exception to any usual
    # drop), and each decision's outcome.
    tried = 0
    for i in range(decided):
        for path in leaf_paths(recall["decisions"][i], ["decisions", i]):
            if i not in selected and path[-1] not in ("decision", "reason", "rank"):
                continue
            forged = with_changed(recall, path)
            tried += 1
            try:
                verdict = verify_receipt(forged, keys)
            except ReceiptFormatError:
                continue
            assert not verdict.valid, f"changing {path} still verifies"
    assert tried >= 4
    # A ranked selection takes its records in the relevance order.
    if len(recall["relevance_receipt"]["results"]) > 1:
        order = copy.deepcopy(recall)
        order["relevance_receipt"]["results"].reverse()
        assert not verify_receipt(order, keys).valid


def test_an_erasure_answer_verifies_offline_and_every_change_of_a_receipt_fails(client):
    # The erasure's answer holds a signed deletion receipt per memory it
    # revoked: each is checked where it is, and any change to one fails,
    # naming the revocation.
    keys = client.receipt_keys()
    chat = CHAT + [{"id": "m2", "role": "user", "name": "Vinay", "created_at": "2026-05-02", "content": "My sister lives in Lyon."}]
    client.add_messages("chat-erase", chat)
    for content, message in (("I moved to Berlin", "m1"), ("My sister lives in Lyon", "m2")):
        assert client.add_fact(content, [("chat-erase", message)]).accepted
    erased = client.delete_all().raw
    assert erased["complete"], erased
    count = len(erased["revocations"])
    assert count >= 2, erased
    assert verify_receipt(erased, keys) == OfflineVerdict(valid=True, checked=["deletion"] * count)
    tried = 0
    for i in range(count):
        for path in leaf_paths(erased["revocations"][i]["deletion_receipt"], ["revocations", i, "deletion_receipt"]):
            forged = with_changed(erased, path)
            tried += 1
            try:
                verdict = verify_receipt(forged, keys)
            except ReceiptFormatError as e:
                assert str(e).startswith(f"revocations[{i}]"), (path, e)
                continue
            assert not verdict.valid, f"changing {path} still verifies"
            assert verdict.problem.startswith(f"revocations[{i}] ("), (path, verdict)
    assert tried >= 40, tried
    pending = copy.deepcopy(erased)
    pending["revocations"][0]["deletion_receipt"] = None
    pending["revocations"][0]["stage"] = "erased"
    verdict = verify_receipt(pending, keys)
    assert not verdict.valid
    assert verdict.problem.endswith("the deletion is erased, with no deletion receipt yet")
    with pytest.raises(ReceiptFormatError):
        verify_receipt(dict(erased, revocations=[]), keys)
