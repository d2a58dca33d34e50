"""Typed results. Each is a frozen dataclass built from the server's JSON;
``raw`` keeps the whole decoded response (receipts and every field a
newer server may add)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

Json = Dict[str, Any]


@dataclass(frozen=True)
class Violation:
    """One reason the write gate refused a memory: ``code`` is the
    violation's stable name (``missing_consent``, ``unsupported_content``,
    ...), ``details`` its other fields."""

    code: str
    details: Json

    @classmethod
    def from_json(cls, data: Any) -> "Violation":
        if not isinstance(data, dict):
            return cls(code=str(data), details={})
        details = {k: v for k, v in data.items() if k != "violation"}
        return cls(code=str(data.get("violation", "")), details=details)


def _violations(data: Json) -> List[Violation]:
    return [Violation.from_json(v) for v in data.get("violations", [])]


@dataclass(frozen=True)
class IngestedMessage:
    """What became of one message of a conversation ingest."""

    message_id: str
    source_id: str
    source_content_sha256: str
    record_id: str
    decision: str
    replayed: bool
    readable: bool
    violations: List[Violation]
    index: int = 0
    """The message's position in the call's messages."""

    @property
    def accepted(self) -> bool:
        return self.decision == "accepted"

    @classmethod
    def from_json(cls, data: Json) -> "IngestedMessage":
        return cls(
            message_id=data["message_id"],
            source_id=data["source_id"],
            source_content_sha256=data["source_content_sha256"],
            record_id=data["record_id"],
            decision=data["decision"],
            replayed=bool(data.get("replayed", False)),
            readable=bool(data.get("readable", False)),
            violations=_violations(data),
            index=int(data.get("index", 0)),
        )


@dataclass(frozen=True)
class SkippedMessage:
    """A message an ingest skipped: ``reason`` is ``empty_content`` (no
    text: a tool-call or image-only turn)."""

    index: int
    reason: str

    @classmethod
    def from_json(cls, data: Json) -> "SkippedMessage":
        return cls(index=int(data["index"]), reason=str(data["reason"]))


@dataclass(frozen=True)
class IngestResult:
    """What a conversation ingest kept and refused."""

    conversation_id: str
    kept: int
    refused: int
    messages: List[IngestedMessage]
    raw: Json = field(repr=False)
    skipped: List[SkippedMessage] = field(default_factory=list)
    """Messages without text, skipped; the others were kept."""

    @classmethod
    def from_json(cls, data: Json) -> "IngestResult":
        return cls(
            conversation_id=data["conversation_id"],
            kept=int(data["kept"]),
            refused=int(data["refused"]),
            messages=[IngestedMessage.from_json(m) for m in data["messages"]],
            raw=data,
            skipped=[SkippedMessage.from_json(m) for m in data.get("skipped", [])],
        )


@dataclass(frozen=True)
class WriteResult:
    """The write gate's decision on a fact or memory proposal."""

    proposal_id: str
    record_id: str
    decision: str
    violations: List[Violation]
    line_id: Optional[str]
    line_generation: Optional[int]
    replayed: bool
    readable: bool
    receipt: Json = field(repr=False)
    raw: Json = field(repr=False)

    @property
    def accepted(self) -> bool:
        return self.decision == "accepted"

    @classmethod
    def from_json(cls, data: Json) -> "WriteResult":
        return cls(
            proposal_id=data["proposal_id"],
            record_id=data["record_id"],
            decision=data["decision"],
            violations=_violations(data),
            line_id=data.get("line_id"),
            line_generation=data.get("line_generation"),
            replayed=bool(data.get("replayed", False)),
            readable=bool(data.get("readable", False)),
            receipt=data.get("receipt", {}),
            raw=data,
        )


@dataclass(frozen=True)
class Hit:
    """One selected memory of a recall, in selection order: its record id,
    exact content, kind, creation instant and, for a ranked recall, its
    relevance score (a float, higher is better; ``None`` when no query
    ranked the recall). ``in_context`` says whether it fit the token
    budget (and so is in :attr:`RecallResult.context`)."""

    record_id: str
    score: Optional[float]
    content: Optional[str] = None
    kind: Optional[str] = None
    created_at_unix_ms: Optional[int] = None
    in_context: bool = True


@dataclass(frozen=True)
class RecallResult:
    """What a recall selected, why, and the receipts."""

    context: str
    blocks: List[str]
    hits: List[Hit]
    decisions: List[Json]
    drop_reasons: Dict[str, int]
    selection_receipt: Json = field(repr=False)
    relevance_receipt: Optional[Json] = field(repr=False)
    omitted_indexes: List[str] = field(default_factory=list)
    raw: Json = field(default_factory=dict, repr=False)

    @property
    def record_ids(self) -> List[str]:
        return [h.record_id for h in self.hits]

    @classmethod
    def from_json(cls, data: Json) -> "RecallResult":
        relevance = data.get("relevance_receipt")
        memories = {m["record_id"]: m for m in data.get("memories", [])}

        def hit(record_id: str) -> Hit:
            m = memories.get(record_id)
            if m is None:
                return Hit(record_id, None)
            score = m.get("score")
            return Hit(
                record_id,
                float(score) if score is not None else None,
                content=m.get("content"),
                kind=m.get("kind"),
                created_at_unix_ms=m.get("created_at_unix_ms"),
                in_context=bool(m.get("in_context", True)),
            )

        return cls(
            context=data.get("context", ""),
            blocks=list(data.get("blocks", [])),
            hits=[hit(rid) for rid in data.get("selected_record_ids", [])],
            decisions=list(data.get("decisions", [])),
            drop_reasons={k: int(v) for k, v in data.get("drop_reasons", {}).items()},
            selection_receipt=data.get("selection_receipt", {}),
            relevance_receipt=relevance,
            omitted_indexes=list(data.get("omitted_indexes", [])),
            raw=data,
        )


@dataclass(frozen=True)
class Memory:
    """One stored memory with its exact content and lifecycle state."""

    record_id: str
    kind: str
    state: str
    content: str
    subject: Json
    created_at_unix_ms: int
    expires_at_unix_ms: Optional[int]
    line_id: str
    line_generation: int
    proposal_id: str
    record: Json = field(repr=False)
    raw: Json = field(repr=False)

    @property
    def active(self) -> bool:
        return self.state == "active"

    @classmethod
    def from_json(cls, data: Json) -> "Memory":
        record = data["record"]
        return cls(
            record_id=record["record_id"],
            kind=record["kind"],
            state=data["state"],
            content=data["content"],
            subject=record.get("subject", {}),
            created_at_unix_ms=int(record["created_at_unix_ms"]),
            expires_at_unix_ms=record.get("expires_at_unix_ms"),
            line_id=data["line_id"],
            line_generation=int(data["line_generation"]),
            proposal_id=data["proposal_id"],
            record=record,
            raw=data,
        )


@dataclass(frozen=True)
class ListedMemory:
    """A memory's identity as a list shows it (no content)."""

    record_id: str
    state: str
    kind: str
    subject_key: str
    created_at_unix_ms: int

    @classmethod
    def from_json(cls, data: Json) -> "ListedMemory":
        return cls(
            record_id=data["record_id"],
            state=data["state"],
            kind=data["kind"],
            subject_key=data["subject_key"],
            created_at_unix_ms=int(data["created_at_unix_ms"]),
        )


@dataclass(frozen=True)
class DeletionReceipt:
    """A deletion receipt: its canonical body, digest and the server's
    signature. Pass it to ``verify_deletion`` to have the server check it,
    or to :func:`mosaic_memory.offline.verify_receipt` (with the server's
    public keys) to check it without the server."""

    body: Json
    receipt_sha256: str
    signature: Optional[Json] = None

    def to_json(self) -> Json:
        out: Json = {"body": self.body, "receipt_sha256": self.receipt_sha256}
        if self.signature is not None:
            out["signature"] = self.signature
        return out

    @classmethod
    def from_json(cls, data: Json) -> "DeletionReceipt":
        return cls(body=data["body"], receipt_sha256=data["receipt_sha256"], signature=data.get("signature"))


@dataclass(frozen=True)
class Deletion:
    """Where a deletion is (``stage``), and its receipt once finalized."""

    record_id: str
    stage: str
    revocation_generation: int
    tombstone: Optional[Json]
    receipt: Optional[DeletionReceipt]
    raw: Json = field(repr=False)

    @property
    def finalized(self) -> bool:
        return self.receipt is not None

    @classmethod
    def from_json(cls, data: Json) -> "Deletion":
        receipt = data.get("deletion_receipt")
        return cls(
            record_id=data["record_id"],
            stage=data["stage"],
            revocation_generation=int(data["revocation_generation"]),
            tombstone=data.get("tombstone"),
            receipt=DeletionReceipt.from_json(receipt) if receipt else None,
            raw=data,
        )


@dataclass(frozen=True)
class Erasure:
    """What deleting all of a principal's memories did."""

    tenant_id: str
    principal_id: str
    deletions: List[Deletion]
    consents_withdrawn: List[str]
    complete: bool
    raw: Json = field(repr=False)

    @property
    def receipts(self) -> List[DeletionReceipt]:
        return [d.receipt for d in self.deletions if d.receipt is not None]

    @classmethod
    def from_json(cls, data: Json) -> "Erasure":
        return cls(
            tenant_id=data["tenant_id"],
            principal_id=data["principal_id"],
            deletions=[Deletion.from_json(r) for r in data.get("revocations", [])],
            consents_withdrawn=list(data.get("consents_withdrawn", [])),
            complete=bool(data["complete"]),
            raw=data,
        )


@dataclass(frozen=True)
class ImportedLine:
    """What an import did with one line: ``outcome`` is ``accepted``,
    ``rejected``, ``replayed`` (the server already held it: nothing was
    written again) or ``error``; ``kind`` is ``message`` or ``memory``
    (``None`` for a line that could not be read); ``code`` is the error's
    code (``error``) or the gate's violation codes, comma-separated
    (``rejected``)."""

    line: int
    """The line's number, from 1, in the lines given."""
    kind: Optional[str]
    outcome: str
    record_id: Optional[str]
    code: Optional[str]

    @classmethod
    def from_json(cls, data: Json) -> "ImportedLine":
        return cls(
            line=int(data["line"]),
            kind=data.get("kind"),
            outcome=str(data["outcome"]),
            record_id=data.get("record_id"),
            code=data.get("code"),
        )


@dataclass(frozen=True)
class ImportResult:
    """What importing export lines did: the lines read, how many were
    accepted, rejected and replayed, the failed lines' error codes by line
    number (from 1) and each line's outcome in order."""

    lines: int
    accepted: int
    rejected: int
    replayed: int
    errors: Dict[int, str]
    results: List[ImportedLine]
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, data: Json) -> "ImportResult":
        return cls(
            lines=int(data["lines"]),
            accepted=int(data["accepted"]),
            rejected=int(data["rejected"]),
            replayed=int(data.get("replayed", 0)),
            errors={int(line): str(code) for line, code in data["errors"].items()},
            results=[ImportedLine.from_json(r) for r in data.get("results", [])],
            raw=data,
        )


@dataclass(frozen=True)
class Verification:
    """A receipt's verdict."""

    valid: bool
    problem: Optional[str]

    @classmethod
    def from_json(cls, data: Json) -> "Verification":
        return cls(valid=bool(data["valid"]), problem=data.get("problem"))


@dataclass(frozen=True)
class Consent:
    """A stored consent: the digest facts rely on."""

    consent_sha256: str

    @classmethod
    def from_json(cls, data: Json) -> "Consent":
        return cls(consent_sha256=data["consent_sha256"])


@dataclass(frozen=True)
class History:
    """One memory's history: the memory itself (with its line identity and
    generation, and the proposal that wrote it, whose write receipt
    ``verify_write`` re-checks); when it was deleted, where its deletion
    is; and the server's record of it (``GET /v1/memories/{id}/history``:
    its state, what it supersedes and what superseded it, what it derives
    from, its write receipt and its audit trail), while the server still
    lists it."""

    memory: Optional[Memory]
    deletion: Optional[Deletion]
    record: Optional[Dict[str, Any]] = None

    @property
    def audit_trail(self) -> List[Dict[str, Any]]:
        """The record's audit events, oldest first (empty when unknown)."""
        return list((self.record or {}).get("audit_trail") or [])
