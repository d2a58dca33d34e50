"""Checking a receipt without the server: from the receipt as the API
returned it and the server's public keys (``GET /v1/keys``, or ``mosaic
doctor --json``).

Needs an Ed25519 implementation: install the ``verify`` extra
(``pip install 'mosaic-memory[verify]'``, which brings ``cryptography``).

What is checked, for every receipt in the document:

* its ``receipt_sha256`` is the digest of its canonical body
  (``SHA-256(domain_tag || 0x0A || canonical_json(body))``, RFC 8785 JSON,
  see the server's ``docs/ENCODING.md``);
* the server's Ed25519 signature over
  ``"mosaic.receipt.signature.v1" || 0x0A || canonical_json({kind, key_id,
  receipt_sha256})`` verifies under the published key with that id (or,
  for a signature that tells when it was made, ``signed_at_unix_ms``, over
  ``"mosaic.receipt.signature.v2" || 0x0A || canonical_json({kind, key_id,
  receipt_sha256, signed_at_unix_ms})``);
* for a recall: the selection receipt names the relevance receipt it came
  with, and its counts add up to the selected records;
* for the audit log: a signed tree head (``GET /v1/admin/audit/head``), an
  inclusion proof with the signed ``head`` it is against, a consistency
  proof with the later signed ``head`` and the earlier one a witness kept
  (``first_head``), and a deletion's ``audit_proof`` (its
  ``deletion_finalized`` event in a signed head): RFC 6962 Merkle trees,
  checked with ``hashlib`` alone (leaf ``SHA-256(0x00 || bytes)``, node
  ``SHA-256(0x01 || left || right)``).

* for a consent withdrawal's or an erasure's answer (``revocations``):
  every revocation in it as a revocation's answer (one still without its
  deletion receipt does not verify);
* for a deletion receipt that binds its record's revoked leaf
  (``revoked_leaf``): the record's entry in state ``revoked`` is in the
  scope root the receipt signs, by the inclusion proof it carries;
* when the keys come as the keys route's JSON (with their validity
  windows): an audit head's ``timestamp_unix_ms`` lies within its key's
  window, a deletion receipt was not finalized after its key was
  retired, and a write, selection or relevance signature's
  ``signed_at_unix_ms`` lies within its key's window (signatures made
  before signatures told their instant carry none: only the signature is
  checked).

* for an explained recall (``decisions``): the receipt's decisions (the
  list's first ``decision_counts.decided``, sorted by record id) hash to
  the digest the signed selection receipt commits to (``exceptions_sha256``,
  or ``decisions_sha256`` before v5), add up to its ``decision_counts`` and
  decide each selected record selected at its rank; and a ranked
  selection takes its records in the relevance receipt's order.

A receipt that passes was issued, as it is, by a server holding one of the
keys.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

SIGNATURE_DOMAIN = "mosaic.receipt.signature.v1"
# A signature that tells when it was made (``signed_at_unix_ms``) covers
# the instant too, under this domain.
SIGNATURE_V2_DOMAIN = "mosaic.receipt.signature.v2"
AUDIT_TREE_HEAD_DOMAIN = "mosaic.audit.tree_head.v1"
AUDIT_EVENT_DOMAIN = "mosaic.store.audit_event.v1"
WRITE_RECEIPT_DOMAIN = "mosaic.memory.write_receipt.v1"
SELECTION_RECEIPT_DOMAIN = "mosaic.memory.selection_receipt.v2"
# A selection receipt that binds its read scopes' commitments
# (``scope_commitments``) is hashed under this domain instead.
SELECTION_RECEIPT_V3_DOMAIN = "mosaic.memory.selection_receipt.v3"
# One that binds them in place of the record set's digest (no
# ``record_set_sha256`` member) is hashed under this one.
SELECTION_RECEIPT_V4_DOMAIN = "mosaic.memory.selection_receipt.v4"
# One that also commits to its decisions by their exceptions alone
# (``exceptions_sha256`` in place of ``decisions_sha256``) under this one:
# what the server issues.
SELECTION_RECEIPT_V5_DOMAIN = "mosaic.memory.selection_receipt.v5"
RELEVANCE_RECEIPT_DOMAIN = "mosaic.memory.relevance_receipt.v1"
# A relevance receipt over an eligible set named by its read scopes'
# commitments (``eligible_scopes_sha256`` in place of
# ``eligible_set_sha256``) is hashed under this domain instead.
RELEVANCE_RECEIPT_V2_DOMAIN = "mosaic.memory.relevance_receipt.v2"
# An explained recall's decision list, as a selection receipt commits to
# it: by its usual outcome and exceptions (v5, ``exceptions_sha256``), or
# with the digest of every record decided on as well (``decisions_sha256``).
SELECTION_EXCEPTIONS_DOMAIN = "mosaic.memory.selection_exceptions.v1"
SELECTION_DECISIONS_DOMAIN = "mosaic.memory.selection_decisions.v2"
DECIDED_RECORDS_DOMAIN = "mosaic.memory.decided_records.v1"
MEMORY_KINDS = ("working", "episodic", "semantic", "procedural")
DROP_REASONS = (
    "kind_disabled",
    "wrong_tenant",
    "policy_mismatch",
    "policy_not_in_force",
    "contested",
    "revoked",
    "superseded",
    "not_yet_valid",
    "expired",
    "subject_mismatch",
    "filtered_out",
    "not_relevant",
    "selection_limit",
)
DELETION_RECEIPT_DOMAIN = "mosaic.store.deletion_receipt.v1"
# A deletion receipt that binds the record's leaf as revoked
# (``revoked_leaf``, schema version 2) is hashed under this domain instead.
DELETION_RECEIPT_V2_DOMAIN = "mosaic.store.deletion_receipt.v2"

_MAX_INT = (1 << 53) - 1


class ReceiptFormatError(ValueError):
    """The document or the keys are not what the API returns."""


@dataclass(frozen=True)
class OfflineVerdict:
    """``valid`` when every receipt in the document verifies; ``checked``
    names them (``write``, ``selection``, ``relevance``, ``deletion``,
    ``audit_head``, ``inclusion_proof``, ``consistency_proof``);
    ``problem`` says why not."""

    valid: bool
    checked: List[str] = field(default_factory=list)
    problem: Optional[str] = None


def _string(value: str) -> str:
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20:
            out.append("\\u%04x" % code)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def canonical_json(value: Any) -> bytes:
    """The canonical JSON bytes the server hashes: RFC 8785 restricted to
    integers of at most 2^53 - 1 (floats are refused)."""
    return _canonical(value).encode("utf-8")


def _canonical(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        if abs(value) > _MAX_INT:
            raise ReceiptFormatError(f"integer {value} is outside the canonical range")
        return str(value)
    if isinstance(value, float):
        raise ReceiptFormatError("receipts hold no floating-point numbers")
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_canonical(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16-be"))
        return "{" + ",".join(_string(k) + ":" + _canonical(v) for k, v in items) + "}"
    raise ReceiptFormatError(f"{type(value).__name__} is not JSON")


def domain_digest(domain_tag: str, value: Any) -> str:
    """``SHA-256(domain_tag || 0x0A || canonical_json(value))`` as hex."""
    return hashlib.sha256(domain_tag.encode("ascii") + b"\n" + canonical_json(value)).hexdigest()


def signing_bytes(kind: str, key_id: str, receipt_sha256: str, signed_at_unix_ms: Optional[int] = None) -> bytes:
    """The exact bytes a receipt signature covers (v2, with the signing
    instant, when ``signed_at_unix_ms`` is given)."""
    body: Dict[str, Any] = {"kind": kind, "key_id": key_id, "receipt_sha256": receipt_sha256}
    if signed_at_unix_ms is None:
        return SIGNATURE_DOMAIN.encode("ascii") + b"\n" + canonical_json(body)
    body["signed_at_unix_ms"] = signed_at_unix_ms
    return SIGNATURE_V2_DOMAIN.encode("ascii") + b"\n" + canonical_json(body)


def key_id(public_key: bytes) -> str:
    """A key's id: ``rk-`` and the first 32 hex digits of SHA-256 of its 32 bytes."""
    return "rk-" + hashlib.sha256(public_key).hexdigest()[:32]


def _ed25519():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(
            "offline verification needs the 'cryptography' package: pip install 'mosaic-memory[verify]'"
        ) from e
    return Ed25519PublicKey, InvalidSignature


def _hex_bytes(text: Any, length: int) -> Optional[bytes]:
    if not isinstance(text, str) or len(text) != 2 * length:
        return None
    if any(c not in "0123456789abcdef" for c in text):
        return None
    return bytes.fromhex(text)


def load_public_keys(keys: Union[Mapping[str, Any], Iterable[str], str]) -> Dict[str, bytes]:
    """The public keys by id, from the JSON of ``GET /v1/keys`` (a dict,
    or its text), ``mosaic doctor --json``'s line, or hex strings. A key
    whose id is not the id of its bytes is refused."""
    if isinstance(keys, str):
        text = keys.strip()
        keys = json.loads(text) if text.startswith("{") else [l for l in text.splitlines() if l.strip()]
    out: Dict[str, bytes] = {}
    if isinstance(keys, Mapping):
        data = keys.get("data", keys)
        data = data.get("signing_keys", data) if isinstance(data, Mapping) else data
        if not isinstance(data, Mapping) or not isinstance(data.get("keys"), list):
            raise ReceiptFormatError("the keys JSON has no 'keys' list")
        for entry in data["keys"]:
            if not isinstance(entry, Mapping) or entry.get("algorithm") != "ed25519":
                raise ReceiptFormatError("a published key is not an ed25519 key")
            raw = _hex_bytes(entry.get("public_key_hex"), 32)
            if raw is None:
                raise ReceiptFormatError("a published key is not 32 bytes of hex")
            if key_id(raw) != entry.get("key_id"):
                raise ReceiptFormatError(f"the published key {entry.get('key_id')} does not have that id")
            out[key_id(raw)] = raw
        return out
    for line in keys:
        raw = _hex_bytes(line.strip(), 32)
        if raw is None:
            raise ReceiptFormatError("a key line is not 32 bytes of hex")
        out[key_id(raw)] = raw
    return out


def load_key_windows(keys: Union[Mapping[str, Any], Iterable[str], str]) -> Dict[str, tuple]:
    """The published keys' validity windows by id, ``(valid_from_unix_ms,
    valid_until_unix_ms or None)``, from the keys route's JSON (or ``mosaic
    doctor --json``'s line); empty for keys given as hex lines, which carry
    no window."""
    if isinstance(keys, str):
        text = keys.strip()
        if not text.startswith("{"):
            return {}
        keys = json.loads(text)
    if not isinstance(keys, Mapping):
        return {}
    data = keys.get("data", keys)
    data = data.get("signing_keys", data) if isinstance(data, Mapping) else data
    out: Dict[str, tuple] = {}
    for entry in data.get("keys", []) if isinstance(data, Mapping) else []:
        start, until = _count(entry.get("valid_from_unix_ms")), entry.get("valid_until_unix_ms")
        if start is None or (until is not None and _count(until) is None):
            raise ReceiptFormatError(f"the published key {entry.get('key_id')} has a malformed validity window")
        out[entry.get("key_id")] = (start, until)
    return out


def _window_problem(key_id_: Any, at: int, exact: bool, windows: Mapping[str, tuple]) -> Optional[str]:
    """Why key ``key_id_`` cannot have signed at ``at`` (``exact``) or at
    ``at`` or later (not ``exact``): outside ``[valid_from, valid_until)``."""
    window = windows.get(key_id_) if isinstance(key_id_, str) else None
    if window is None:
        return None
    start, until = window
    if exact and at < start:
        return f"signed at {at}, before key {key_id_} became valid at {start}"
    if exact and until is not None and at >= until:
        return f"signed at {at}, after key {key_id_} was retired at {until}"
    if not exact and until is not None and at >= until:
        return f"made at {at}, after key {key_id_} was retired at {until}: that key cannot have signed it"
    return None


def _signed_instants(document: Mapping[str, Any]) -> List[tuple]:
    """``(what, key_id, instant, exact)`` of every signature the document
    carries whose signing instant its signed fields tell: an audit head's
    timestamp (when it was signed), a deletion receipt's finalization (it
    is signed then or later), a write, selection or relevance signature's
    ``signed_at_unix_ms`` (when it was signed)."""
    out: List[tuple] = []
    if any(isinstance(document.get(k), Mapping) for k in ("selection_receipt", "receipt", "write_receipt")):
        for name, what in (
            ("selection_signature", "selection receipt"),
            ("relevance_signature", "relevance receipt"),
            ("receipt_signature", "write receipt"),
            ("write_receipt_signature", "write receipt"),
        ):
            signature = document.get(name)
            if isinstance(signature, Mapping) and "signed_at_unix_ms" in signature:
                out.append((what, signature.get("key_id"), signature["signed_at_unix_ms"], True))
        return out

    def head(what: str, value: Any) -> None:
        if isinstance(value, Mapping) and isinstance(value.get("signature"), Mapping):
            out.append((what, value["signature"].get("key_id"), value.get("timestamp_unix_ms"), True))

    deletion = document.get("deletion_receipt")
    if deletion is None and "body" in document:
        deletion = document
    if isinstance(deletion, Mapping):
        audit = document.get("audit_proof") if deletion is not document else None
        if isinstance(audit, Mapping):
            head("audit head", audit.get("head"))
        signature, body = deletion.get("signature"), deletion.get("body")
        if isinstance(signature, Mapping) and isinstance(body, Mapping):
            out.append(("deletion receipt", signature.get("key_id"), body.get("finalized_at_unix_ms"), False))
        return out
    if "inclusion_proof" in document or "consistency_proof" in document:
        head("audit head", document.get("head"))
        head("earlier audit head", document.get("first_head"))
        return out
    if "seq" in document and "signature" in document:
        head("audit head", document)
    revocations = document.get("revocations")
    if isinstance(revocations, list):
        for revocation in revocations:
            if isinstance(revocation, Mapping):
                out.extend(_signed_instants(revocation))
    return out


def deletion_receipt_domain(body: Mapping[str, Any]) -> str:
    """The domain tag a deletion receipt's body is hashed under: v2 when it
    binds the record's revoked leaf (``revoked_leaf``), v1 otherwise."""
    return DELETION_RECEIPT_V2_DOMAIN if "revoked_leaf" in body else DELETION_RECEIPT_DOMAIN


def _revoked_leaf_problem(body: Mapping[str, Any]) -> Optional[str]:
    """Why a v2 deletion receipt's ``revoked_leaf`` does not show the
    record's entry, in state ``revoked``, in the scope root it binds."""
    if "revoked_leaf" not in body:
        return None
    if body.get("schema_version") != 2:
        return f"a receipt that binds a revoked leaf is schema version 2, not {body.get('schema_version')}"
    leaf, tombstone = body["revoked_leaf"], body.get("tombstone")
    if not isinstance(leaf, Mapping) or set(leaf) != {"commitment", "record_sha256", "proof"}:
        return "revoked leaf: malformed"
    commitment = leaf["commitment"]
    if not isinstance(commitment, Mapping) or not isinstance(tombstone, Mapping):
        return "revoked leaf: malformed"
    entry = {"record_id": tombstone.get("record_id"), "record_sha256": leaf["record_sha256"], "state": "revoked"}
    if not verify_scope_inclusion(entry, leaf["proof"], commitment.get("root_sha256")):
        return "revoked leaf: the record's revoked entry is not in the scope root the receipt binds"
    return None


def _signature_problem(what: str, signature: Any, kind: str, digest: str, keys: Mapping[str, bytes]) -> Optional[str]:
    if not isinstance(signature, Mapping):
        return f"the {what} receipt carries no signature"
    members = {"kind", "key_id", "receipt_sha256", "signature_hex"}
    if set(signature) not in (members, members | {"signed_at_unix_ms"}):
        return f"{what} signature: the signature is malformed"
    signed_at = signature.get("signed_at_unix_ms")
    if "signed_at_unix_ms" in signature and _count(signed_at) is None:
        return f"{what} signature: the signature is malformed"
    if signature["kind"] != kind:
        return f"{what} signature: the signature is over a {signature['kind']} receipt, not a {kind} one"
    if signature["receipt_sha256"] != digest:
        return f"{what} signature: the signature names another receipt_sha256 than the receipt's"
    public = keys.get(signature["key_id"]) if isinstance(signature["key_id"], str) else None
    if public is None:
        return f"{what} signature: no published key has key id {signature['key_id']}"
    raw = _hex_bytes(signature["signature_hex"], 64)
    if raw is None:
        return f"{what} signature: the signature is malformed"
    Ed25519PublicKey, InvalidSignature = _ed25519()
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(raw, signing_bytes(kind, signature["key_id"], digest, signed_at))
    except InvalidSignature:
        return f"{what} signature: the signature does not verify under key {signature['key_id']}"
    return None


def _body_digest(domain: str, receipt: Mapping[str, Any]) -> str:
    return domain_digest(domain, {k: v for k, v in receipt.items() if k != "receipt_sha256"})


def _check(what: str, domain: str, kind: str, receipt: Any, signature: Any, keys: Mapping[str, bytes]) -> Optional[str]:
    if not isinstance(receipt, Mapping) or not isinstance(receipt.get("receipt_sha256"), str):
        raise ReceiptFormatError(f"the {what} receipt is not an object with receipt_sha256")
    digest = _body_digest(domain, receipt)
    if digest != receipt["receipt_sha256"]:
        return f"{what} receipt_sha256 does not match the canonical body"
    return _signature_problem(what, signature, kind, digest, keys)


# ---------------------------------------------------------------- audit log


def leaf_hash(data: bytes) -> bytes:
    """RFC 6962 leaf hash: ``SHA-256(0x00 || data)``."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 node hash: ``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def audit_event_leaf(event: Mapping[str, Any]) -> str:
    """The leaf hash (hex) of an audit event body: over the bytes its
    digest covers, ``"mosaic.store.audit_event.v1" || 0x0A ||
    canonical_json(body)``."""
    return leaf_hash(AUDIT_EVENT_DOMAIN.encode("ascii") + b"\n" + canonical_json(event)).hex()


def _count(value: Any) -> Optional[int]:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_INT:
        return value
    return None


def _hashes(values: Any) -> Optional[List[bytes]]:
    if not isinstance(values, list):
        return None
    out = [_hex_bytes(v, 32) for v in values]
    return None if any(h is None for h in out) else out  # type: ignore[return-value]


def verify_inclusion(leaf: bytes, index: int, size: int, proof: List[bytes], root: bytes) -> bool:
    """RFC 9162, 2.1.3.2: ``leaf`` is leaf ``index`` of the tree of ``size``
    leaves whose root is ``root``."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


# ---------------------------------------------------------------- read scopes

RECORD_DOMAIN = "mosaic.memory.record.v1"
SCOPE_ENTRY_DOMAIN = "mosaic.memory.scope_entry.v1"
SCOPE_BUCKET_DOMAIN = "mosaic.memory.scope_bucket.v1"
SCOPE_TREE_LEVELS = 10
SCOPE_BUCKETS = 1 << SCOPE_TREE_LEVELS


def scope_entry(record: Mapping[str, Any], state: str) -> Dict[str, str]:
    """A memory's entry in its read scope's commitment, from the record and
    state ``GET /v1/memories/{id}`` answers (``record``, ``state``)."""
    return {"record_id": record["record_id"], "record_sha256": domain_digest(RECORD_DOMAIN, record), "state": state}


def scope_entry_hash(entry: Mapping[str, Any]) -> bytes:
    """``SHA-256("mosaic.memory.scope_entry.v1" || 0x0A || canonical_json(
    {record_id, record_sha256, state}))``."""
    body = {"record_id": entry["record_id"], "record_sha256": entry["record_sha256"], "state": entry["state"]}
    return hashlib.sha256(SCOPE_ENTRY_DOMAIN.encode("ascii") + b"\n" + canonical_json(body)).digest()


def scope_bucket(record_id: str) -> int:
    """The first ten bits of SHA-256 of the record id."""
    digest = hashlib.sha256(record_id.encode("utf-8")).digest()
    return ((digest[0] << 8) | digest[1]) >> (16 - SCOPE_TREE_LEVELS)


def scope_bucket_hash(entries: List[bytes]) -> bytes:
    """``SHA-256(0x00 || "mosaic.memory.scope_bucket.v1" || 0x0A || entries)``."""
    return leaf_hash(SCOPE_BUCKET_DOMAIN.encode("ascii") + b"\n" + b"".join(entries))


def verify_scope_inclusion(entry: Mapping[str, Any], proof: Any, root_sha256: str) -> bool:
    """That ``entry`` (see :func:`scope_entry`) is in the read scope whose
    root is ``root_sha256`` (a selection receipt's
    ``scope_commitments[].root_sha256``), by the ``proof`` of ``GET
    /v1/memories/{id}/inclusion`` (docs/ENCODING.md, "Read scope
    commitments"). False for any malformed part."""
    if not isinstance(proof, Mapping) or set(proof) != {"bucket", "position", "bucket_entries", "path"}:
        return False
    root = _hex_bytes(root_sha256, 32)
    entries, path = _hashes(proof["bucket_entries"]), _hashes(proof["path"])
    bucket, position = _count(proof["bucket"]), _count(proof["position"])
    if root is None or entries is None or path is None or bucket is None or position is None:
        return False
    if not isinstance(entry.get("record_id"), str) or _hex_bytes(entry.get("record_sha256"), 32) is None:
        return False
    if not isinstance(entry.get("state"), str) or not entry["state"]:
        return False
    if bucket != scope_bucket(entry["record_id"]) or position >= len(entries):
        return False
    if entries[position] != scope_entry_hash(entry):
        return False
    return verify_inclusion(scope_bucket_hash(entries), bucket, SCOPE_BUCKETS, path, root)


def verify_consistency(first: int, second: int, first_root: bytes, second_root: bytes, proof: List[bytes]) -> bool:
    """RFC 9162, 2.1.4.2: the tree of ``first`` leaves is a prefix of the
    tree of ``second`` leaves."""
    if first == 0 or first > second:
        return False
    if first == second:
        return not proof and first_root == second_root
    path = ([first_root] if first & (first - 1) == 0 else []) + list(proof)
    if not path:
        return False
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == first_root and sr == second_root


def _head_problem(head: Any, keys: Mapping[str, bytes]) -> Optional[str]:
    fields = ("tree_size", "root_sha256", "timestamp_unix_ms", "seq", "sha256", "signature")
    if not isinstance(head, Mapping) or set(head) != set(fields):
        raise ReceiptFormatError("the audit head is not {tree_size, root_sha256, timestamp_unix_ms, seq, sha256, signature}")
    size, at = _count(head["tree_size"]), _count(head["timestamp_unix_ms"])
    if size is None or at is None or not isinstance(head["root_sha256"], str) or not isinstance(head["sha256"], str):
        raise ReceiptFormatError("the audit head's fields have the wrong types")
    if head["seq"] != size:
        return "the audit head's seq is not its tree_size"
    digest = domain_digest(
        AUDIT_TREE_HEAD_DOMAIN,
        {"tree_size": size, "root_sha256": head["root_sha256"], "timestamp_unix_ms": at, "chain_sha256": head["sha256"]},
    )
    problem = _signature_problem("audit head", head["signature"], "audit_head", digest, keys)
    if problem is None and _hex_bytes(head["root_sha256"], 32) is None:
        return "the audit head's root is not SHA-256 hex"
    return problem


def _inclusion_problem(head: Any, proof: Any, keys: Mapping[str, bytes]) -> Optional[str]:
    problem = _head_problem(head, keys)
    if problem:
        return problem
    if not isinstance(proof, Mapping) or set(proof) != {"seq", "tree_size", "leaf_sha256", "audit_path"}:
        raise ReceiptFormatError("the inclusion proof is not {seq, tree_size, leaf_sha256, audit_path}")
    seq, size = _count(proof["seq"]), _count(proof["tree_size"])
    leaf, path = _hex_bytes(proof["leaf_sha256"], 32), _hashes(proof["audit_path"])
    if seq is None or size is None or leaf is None or path is None or seq == 0:
        return "inclusion proof: malformed"
    if size != head["tree_size"]:
        return f"the inclusion proof is against a tree of {size} events, the head's holds {head['tree_size']}"
    if not verify_inclusion(leaf, seq - 1, size, path, bytes.fromhex(head["root_sha256"])):
        return "inclusion proof: the proof does not lead to the expected root"
    return None


def _consistency_problem(first: Any, second: Any, proof: Any, keys: Mapping[str, bytes]) -> Optional[str]:
    for head in (first, second):
        problem = _head_problem(head, keys)
        if problem:
            return problem
    if not isinstance(proof, Mapping) or set(proof) != {"first_size", "second_size", "proof"}:
        raise ReceiptFormatError("the consistency proof is not {first_size, second_size, proof}")
    m, n, path = _count(proof["first_size"]), _count(proof["second_size"]), _hashes(proof["proof"])
    if m is None or n is None or path is None:
        return "consistency proof: malformed"
    if m != first["tree_size"] or n != second["tree_size"]:
        return "the consistency proof is not between the two heads' sizes"
    if not verify_consistency(m, n, bytes.fromhex(first["root_sha256"]), bytes.fromhex(second["root_sha256"]), path):
        return "consistency proof: the later head does not extend the earlier one"
    return None


def _deletion_audit_problem(deletion: Mapping[str, Any], proof: Any) -> Optional[str]:
    if not isinstance(proof, Mapping) or set(proof) != {"event", "inclusion_proof", "head"}:
        raise ReceiptFormatError("the audit proof is not {event, inclusion_proof, head}")
    event = proof["event"]
    if not isinstance(event, Mapping):
        raise ReceiptFormatError("the audit event is not an object")
    tombstone = deletion["body"].get("tombstone") if isinstance(deletion["body"], Mapping) else None
    record_id = tombstone.get("record_id") if isinstance(tombstone, Mapping) else None
    if (
        event.get("kind") != "deletion_finalized"
        or event.get("ref_id") != record_id
        or event.get("payload") != {"deletion_receipt_sha256": deletion["receipt_sha256"]}
    ):
        return "the audit event is not this receipt's deletion_finalized event"
    inclusion = proof["inclusion_proof"]
    if not isinstance(inclusion, Mapping) or event.get("seq") != inclusion.get("seq") or audit_event_leaf(event) != inclusion.get("leaf_sha256"):
        return "the inclusion proof is not about this audit event"
    return None


def selection_receipt_domain(selection: Mapping[str, Any]) -> Optional[str]:
    """The domain tag a selection receipt is hashed under, from its members
    alone: v5 with ``exceptions_sha256`` (scope commitments in place of the
    record set, no ``decisions_sha256``), v2 with a record set's digest
    alone, v3 with it and scope commitments, v4 with scope commitments in
    place of the record set; ``None`` when it binds neither, or mixes the
    members of v5 and an earlier version (no server issues such a
    receipt)."""
    bound = bool(selection.get("scope_commitments"))
    if "exceptions_sha256" in selection:
        mixed = "decisions_sha256" in selection or "record_set_sha256" in selection
        return SELECTION_RECEIPT_V5_DOMAIN if bound and not mixed else None
    if "record_set_sha256" in selection:
        return SELECTION_RECEIPT_V3_DOMAIN if "scope_commitments" in selection else SELECTION_RECEIPT_DOMAIN
    return SELECTION_RECEIPT_V4_DOMAIN if bound else None


def relevance_receipt_domain(relevance: Mapping[str, Any]) -> Optional[str]:
    """The domain tag a relevance receipt is hashed under, from its members
    alone: v2 when it names its eligible set by the read scopes'
    commitments (``eligible_scopes_sha256``), v1 when by its entries
    (``eligible_set_sha256``); ``None`` with both or neither."""
    by_scopes = "eligible_scopes_sha256" in relevance
    if by_scopes == ("eligible_set_sha256" in relevance):
        return None
    return RELEVANCE_RECEIPT_V2_DOMAIN if by_scopes else RELEVANCE_RECEIPT_DOMAIN


def _decision(value: Any) -> Mapping[str, Any]:
    """One ``MemoryDecision`` as the API returns it, or a format error."""
    if isinstance(value, Mapping) and set(value) == {"record_id", "kind", "outcome"}:
        outcome = value["outcome"]
        if isinstance(value["record_id"], str) and value["kind"] in MEMORY_KINDS and isinstance(outcome, Mapping):
            if set(outcome) == {"decision", "rank"} and outcome["decision"] == "selected":
                if _count(outcome["rank"]) is not None and outcome["rank"] < 1 << 32:
                    return value
            if set(outcome) == {"decision", "reason"} and outcome["decision"] == "dropped":
                if outcome["reason"] in DROP_REASONS:
                    return value
    raise ReceiptFormatError("a decision is not {record_id, kind, outcome} as the API returns it")


def _usual_outcome(decisions: List[Mapping[str, Any]]) -> Optional[Dict[str, str]]:
    """The drop most decisions have (the smallest reason name among
    equals); ``None`` when nothing was dropped."""
    drops: Dict[str, int] = {}
    for d in decisions:
        if d["outcome"]["decision"] == "dropped":
            drops[d["outcome"]["reason"]] = drops.get(d["outcome"]["reason"], 0) + 1
    if not drops:
        return None
    reason = min(drops.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    return {"decision": "dropped", "reason": reason}


def exceptions_digest(decisions: List[Mapping[str, Any]]) -> str:
    """The ``mosaic.memory.selection_exceptions.v1`` digest of a decision
    list sorted by record id: ``{usual, exceptions}``, what a v5 selection
    receipt's ``exceptions_sha256`` commits to."""
    usual = _usual_outcome(decisions)
    exceptions = [d for d in decisions if d["outcome"] != usual]
    return domain_digest(SELECTION_EXCEPTIONS_DOMAIN, {"usual": usual, "exceptions": exceptions})


def decisions_digest(decisions: List[Mapping[str, Any]]) -> str:
    """The ``mosaic.memory.selection_decisions.v2`` digest of a decision
    list sorted by record id (``decisions_sha256`` of receipts before v5)."""
    decided = domain_digest(DECIDED_RECORDS_DOMAIN, [{"record_id": d["record_id"], "kind": d["kind"]} for d in decisions])
    usual = _usual_outcome(decisions)
    exceptions = [d for d in decisions if d["outcome"] != usual]
    return domain_digest(SELECTION_DECISIONS_DOMAIN, {"decided_sha256": decided, "usual": usual, "exceptions": exceptions})


def _decisions_problem(selection: Mapping[str, Any], decisions: List[Mapping[str, Any]]) -> Optional[str]:
    """Why ``decisions`` is not the list the selection receipt commits to
    (the Rust verifier's words)."""
    ids = [d["record_id"] for d in decisions]
    if any(a >= b for a, b in zip(ids, ids[1:])):
        return "decisions are not sorted by record id without repeats"
    by_list, by_exceptions = selection.get("decisions_sha256"), selection.get("exceptions_sha256")
    if by_list is not None and by_exceptions is None:
        digest = decisions_digest(decisions)
    elif by_list is None and by_exceptions is not None:
        digest = exceptions_digest(decisions)
    else:
        return "decisions do not hash to the receipt's decisions_sha256"
    if digest != (by_exceptions if by_exceptions is not None else by_list):
        return "decisions do not hash to the receipt's decisions_sha256"
    dropped: Dict[str, int] = {}
    for d in decisions:
        if d["outcome"]["decision"] == "dropped":
            dropped[d["outcome"]["reason"]] = dropped.get(d["outcome"]["reason"], 0) + 1
    counts = {"decided": len(decisions), "selected": len(decisions) - sum(dropped.values()), "dropped": dropped}
    if counts != selection.get("decision_counts"):
        return "decisions do not add up to the receipt's decision_counts"
    at = {d["record_id"]: d["outcome"] for d in decisions}
    for rank, record_id in enumerate(selection.get("selected_record_ids") or []):
        if at.get(record_id) != {"decision": "selected", "rank": rank}:
            return f"selected record {record_id} is not decided selected at its rank"
    return None


def verify_receipt(document: Mapping[str, Any], keys: Union[Mapping[str, Any], Iterable[str], str]) -> OfflineVerdict:
    """Checks the receipts in one API answer, offline: a proposal's
    (``receipt``, ``receipt_signature``), a memory's history
    (``write_receipt``, ``write_receipt_signature``), a recall's (``selection_receipt``,
    ``relevance_receipt`` and their signatures), a revocation's
    (``deletion_receipt``, with its ``audit_proof`` when the deletion route
    gave one), a deletion receipt alone, a signed audit tree head (``GET
    /v1/admin/audit/head``), an inclusion proof with its signed ``head``,
    a consistency proof with the later signed ``head`` and the kept
    ``first_head``, or a consent withdrawal's or an erasure's answer
    (``revocations``, each with its deletion receipt). ``keys`` as
    :func:`load_public_keys`
    takes them; given as the keys route's JSON, their validity windows are
    checked too (see :func:`load_key_windows`). Raises
    :class:`ReceiptFormatError` when the document holds no receipt; a
    receipt that does not verify is a verdict."""
    public = load_public_keys(keys)
    if not public:
        raise ReceiptFormatError("no public key given")
    found = _verify(document, public)
    if not found.valid:
        return found
    windows = load_key_windows(keys)
    for what, signer, at, exact in _signed_instants(document):
        if _count(at) is None:
            continue
        problem = _window_problem(signer, at, exact, windows)
        if problem is not None:
            return OfflineVerdict(valid=False, checked=found.checked, problem=f"{what} signature: {problem}")
    return found


def _verify(document: Mapping[str, Any], public: Mapping[str, bytes]) -> OfflineVerdict:

    def verdict(checked: List[str], problem: Optional[str]) -> OfflineVerdict:
        return OfflineVerdict(valid=problem is None, checked=checked, problem=problem)

    if isinstance(document.get("selection_receipt"), Mapping):
        selection = document["selection_receipt"]
        relevance = document.get("relevance_receipt")
        checked = ["selection"] + (["relevance"] if relevance is not None else [])
        domain = selection_receipt_domain(selection)
        if domain is None:
            if "exceptions_sha256" in selection and selection.get("scope_commitments"):
                return verdict(checked, "the selection receipt mixes the members of two versions")
            return verdict(checked, "the selection receipt binds neither a record set nor scope commitments")
        problem = _check("selection", domain, "selection", selection, document.get("selection_signature"), public)
        if problem:
            return verdict(checked, problem)
        named = selection.get("relevance_receipt_sha256")
        if relevance is None:
            if named is not None:
                return verdict(checked, "the selection receipt names a relevance receipt that was not supplied")
        else:
            if not isinstance(relevance, Mapping):
                raise ReceiptFormatError("the relevance receipt is not an object")
            relevance_domain = relevance_receipt_domain(relevance)
            if relevance_domain is None:
                return verdict(checked, "the relevance receipt names its eligible set by neither its entries nor its scopes, or by both")
            problem = _check("relevance", relevance_domain, "relevance", relevance, document.get("relevance_signature"), public)
            if problem:
                return verdict(checked, problem)
            if named != relevance["receipt_sha256"]:
                return verdict(checked, "the selection receipt names another relevance receipt")
        counts = selection.get("decision_counts") or {}
        dropped = sum((counts.get("dropped") or {}).values())
        if counts.get("selected") != len(selection.get("selected_record_ids") or []) or counts.get("selected", 0) + dropped != counts.get("decided"):
            return verdict(checked, "decision_counts do not add up to the selected records")
        # A ranked selection takes the relevance results in their order.
        if relevance is not None:
            ranked = iter(r.get("record_id") for r in relevance.get("results") or [] if isinstance(r, Mapping))
            for record_id in selection.get("selected_record_ids") or []:
                if not any(r == record_id for r in ranked):
                    return verdict(checked, f"selected record {record_id} is not in the relevance order")
        # An explained recall lists the receipt's decisions first, then the
        # policy_mismatch ones outside the receipt.
        decisions = document.get("decisions")
        if decisions is not None and not isinstance(decisions, list):
            raise ReceiptFormatError("decisions is not a list")
        if decisions:
            listed = [_decision(d) for d in decisions]
            problem = _decisions_problem(selection, listed[: _count(counts.get("decided")) or 0])
            if problem:
                return verdict(checked, problem)
        return verdict(checked, None)
    if isinstance(document.get("receipt"), Mapping):
        return verdict(
            ["write"],
            _check("write", WRITE_RECEIPT_DOMAIN, "write", document["receipt"], document.get("receipt_signature"), public),
        )
    if isinstance(document.get("write_receipt"), Mapping):  # a memory's history
        return verdict(
            ["write"],
            _check("write", WRITE_RECEIPT_DOMAIN, "write", document["write_receipt"], document.get("write_receipt_signature"), public),
        )
    deletion = document.get("deletion_receipt")
    if deletion is None and "body" in document:
        deletion = document
    if isinstance(deletion, Mapping):
        if not isinstance(deletion.get("body"), Mapping) or not isinstance(deletion.get("receipt_sha256"), str):
            raise ReceiptFormatError("the deletion receipt is not {body, receipt_sha256, signature}")
        audit = document.get("audit_proof") if deletion is not document else None
        checked = ["deletion"] + (["audit_head", "inclusion_proof"] if audit is not None else [])
        digest = domain_digest(deletion_receipt_domain(deletion["body"]), deletion["body"])
        if digest != deletion["receipt_sha256"]:
            return verdict(checked, "receipt_sha256 does not match the canonical body")
        problem = _signature_problem("deletion", deletion.get("signature"), "deletion", digest, public)
        if problem is None:
            problem = _revoked_leaf_problem(deletion["body"])
        if problem is None and audit is not None:
            problem = _deletion_audit_problem(deletion, audit) or _inclusion_problem(audit["head"], audit["inclusion_proof"], public)
        return verdict(checked, problem)
    if "inclusion_proof" in document:
        if "head" not in document:
            raise ReceiptFormatError("an inclusion proof needs the signed head it is against, as head")
        return verdict(["audit_head", "inclusion_proof"], _inclusion_problem(document["head"], document["inclusion_proof"], public))
    if "consistency_proof" in document:
        if "head" not in document or "first_head" not in document:
            raise ReceiptFormatError("a consistency proof needs the later signed head (head) and the kept one (first_head)")
        return verdict(
            ["audit_head", "consistency_proof"],
            _consistency_problem(document["first_head"], document["head"], document["consistency_proof"], public),
        )
    if "seq" in document and "signature" in document:
        return verdict(["audit_head"], _head_problem(document, public))
    # A consent withdrawal's or an erasure's answer: every revocation in
    # it, each with its deletion receipt, checked as a revocation's answer.
    revocations = document.get("revocations")
    if isinstance(revocations, list) and revocations:
        checked: List[str] = []
        for i, revocation in enumerate(revocations):
            if not isinstance(revocation, Mapping):
                raise ReceiptFormatError(f"revocations[{i}] is not an object")
            what = f"revocations[{i}] ({revocation.get('record_id', '?')})"
            if revocation.get("deletion_receipt") is None:
                stage = revocation.get("stage") if isinstance(revocation.get("stage"), str) else "not finalized"
                return verdict(checked, f"{what}: the deletion is {stage}, with no deletion receipt yet")
            try:
                found = _verify(revocation, public)
            except ReceiptFormatError as e:
                raise ReceiptFormatError(f"{what}: {e}") from e
            checked += found.checked
            if found.problem is not None:
                return verdict(checked, f"{what}: {found.problem}")
        return verdict(checked, None)
    raise ReceiptFormatError(
        "the document holds no receipt (a proposal's, a recall's, a revocation's, a consent withdrawal's or an erasure's answer, "
        "a deletion receipt or an audit head)"
    )


__all__ = [
    "OfflineVerdict",
    "ReceiptFormatError",
    "audit_event_leaf",
    "canonical_json",
    "decisions_digest",
    "deletion_receipt_domain",
    "domain_digest",
    "exceptions_digest",
    "key_id",
    "leaf_hash",
    "load_key_windows",
    "load_public_keys",
    "node_hash",
    "signing_bytes",
    "verify_consistency",
    "verify_inclusion",
    "verify_receipt",
]
