"""The sync :class:`Mosaic` and async :class:`AsyncMosaic` clients.

Both build the same requests (:class:`_Call`) and decode the same typed
results; only the transport differs (``httpx.Client`` or
``httpx.AsyncClient``)."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, Iterable, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union
from urllib.parse import quote

import httpx

from .errors import ConnectionFailed, MosaicError, error_from_response
from .types import (
    Consent,
    Deletion,
    DeletionReceipt,
    Erasure,
    History,
    ImportResult,
    IngestResult,
    ListedMemory,
    Memory,
    RecallResult,
    Verification,
    WriteResult,
)

__all__ = ["Mosaic", "AsyncMosaic", "DEFAULT_BASE_URL", "USER_HEADER"]

DEFAULT_BASE_URL = "http://127.0.0.1:7070"
#: The header naming the end user an application key acts for.
USER_HEADER = "X-Mosaic-User"
#: The media type of export lines (one JSON object a line).
JSON_LINES = "application/x-ndjson"
#: At most this many lines (and :data:`IMPORT_CHUNK_BYTES`) go in one
#: import request, as ``mosaic import`` sends them, so each request stays
#: under the server's body limit (1 MiB by default).
IMPORT_CHUNK_LINES = 100
IMPORT_CHUNK_BYTES = 512 * 1024

T = TypeVar("T")
Message = Union[Mapping[str, Any], str]
Cite = Union[Mapping[str, str], Sequence[str]]


@dataclass
class _Call(Generic[T]):
    method: str
    path: str
    decode: Callable[[Any], T]
    json: Any = None
    params: Optional[Dict[str, str]] = None
    user_id: Optional[str] = None
    #: A body of JSON lines, sent as is (instead of ``json``).
    content: Optional[str] = None
    #: The answer is JSON lines: ``decode`` receives its text.
    text: bool = False


def _segment(value: str) -> str:
    return quote(value, safe="")


def _message(m: Message) -> Dict[str, Any]:
    if isinstance(m, str):
        return {"role": "user", "content": m}
    allowed = {"id", "role", "content", "name", "created_at"}
    unknown = set(m) - allowed
    if unknown:
        raise ValueError(f"unknown message fields {sorted(unknown)}; allowed: {sorted(allowed)}")
    out = {k: v for k, v in m.items() if v is not None}
    out.setdefault("role", "user")
    return out


def _cite(c: Cite) -> Dict[str, str]:
    if isinstance(c, Mapping):
        return {"conversation_id": c["conversation_id"], "message_id": c["message_id"]}
    conversation_id, message_id = c
    return {"conversation_id": conversation_id, "message_id": message_id}


def _drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _import_chunks(lines: Union[str, Iterable[str]]) -> List[Tuple[int, str]]:
    """Import lines as request bodies, each with the number of lines
    before it. Lines are split on ``\\n`` alone, as the server splits them
    (a JSON string may hold other line separators); an iterable's items
    are lines (a trailing newline optional, as a file yields them). Each
    body holds at least one non-blank line (all of them when none is)."""
    if isinstance(lines, str):
        text = lines
    else:
        text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    split = text.split("\n")
    if split and split[-1] == "":
        split.pop()
    chunks: List[Tuple[int, str]] = []
    start, filled, size = 0, 0, 0
    for i, line in enumerate(split):
        blank = not line.strip(" \t\r\x0b\x0c")
        if not blank and filled and (filled == IMPORT_CHUNK_LINES or size + len(line.encode("utf-8")) > IMPORT_CHUNK_BYTES):
            chunks.append((start, "\n".join(split[start:i])))
            start, filled, size = i, 0, 0
        if not blank:
            filled += 1
        size += len(line.encode("utf-8")) + 1
    chunks.append((start, "\n".join(split[start:])))
    return chunks


def _shifted(data: Any, offset: int) -> Dict[str, Any]:
    """One import request's answer numbered by the lines given: the
    request's first line is line ``offset + 1`` of them."""
    errors, results = data["errors"], data.get("results", [])
    if not isinstance(errors, dict) or not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise TypeError("errors is not an object or results not a list of objects")
    return dict(
        data,
        errors={str(int(line) + offset): code for line, code in errors.items()},
        results=[dict(r, line=int(r["line"]) + offset) for r in results],
    )


def _imported(answers: List[Dict[str, Any]]) -> ImportResult:
    """The answers of an import's requests as one result, as if one
    request had carried every line."""
    if len(answers) == 1:
        return ImportResult.from_json(answers[0])
    merged: Dict[str, Any] = {"lines": 0, "accepted": 0, "rejected": 0, "replayed": 0, "errors": {}, "results": []}
    for answer in answers:
        for count in ("lines", "accepted", "rejected", "replayed"):
            merged[count] += int(answer.get(count, 0))
        merged["errors"].update(answer["errors"])
        merged["results"].extend(answer["results"])
    return ImportResult.from_json(merged)


def _address(namespace: Sequence[str], key: str, workspace_id: Optional[str]) -> Dict[str, str]:
    params = {"namespace": "/".join(namespace), "key": key}
    if workspace_id is not None:
        params.update({"type": "workspace", "workspace_id": workspace_id})
    return params


class _Api:
    """Request builders shared by both clients."""

    def __init__(self, user_id: Optional[str]) -> None:
        self._user_id = user_id

    def _user(self, user_id: Optional[str]) -> Optional[str]:
        return user_id if user_id is not None else self._user_id

    def add_messages(self, conversation_id: str, messages: Iterable[Message], workspace_id: Optional[str], user_id: Optional[str]) -> _Call[IngestResult]:
        body = _drop_none({"messages": [_message(m) for m in messages], "workspace_id": workspace_id})
        return _Call("POST", f"/v1/conversations/{_segment(conversation_id)}/messages", IngestResult.from_json, body, user_id=self._user(user_id))

    def add_fact(self, content: str, cites: Iterable[Cite], *, claims: Optional[List[Any]], workspace_id: Optional[str], consent_receipt_sha256: Optional[str], judgments: Optional[List[Any]], supersedes_record_id: Optional[str], expected_line_generation: Optional[int], ttl_ms: Optional[int], user_id: Optional[str]) -> _Call[WriteResult]:
        body = _drop_none({
            "content": content,
            "cites": [_cite(c) for c in cites],
            "claims": claims,
            "workspace_id": workspace_id,
            "consent_receipt_sha256": consent_receipt_sha256,
            "judgments": judgments,
            "supersedes_record_id": supersedes_record_id,
            "expected_line_generation": expected_line_generation,
            "ttl_ms": ttl_ms,
        })
        return _Call("POST", "/v1/facts", WriteResult.from_json, body, user_id=self._user(user_id))

    def give_consent(self, purpose: str, ui_release: str, consent_id: Optional[str], user_id: Optional[str]) -> _Call[Consent]:
        body = _drop_none({"purpose": purpose, "ui_release": ui_release, "consent_id": consent_id})
        return _Call("POST", "/v1/consents", Consent.from_json, body, user_id=self._user(user_id))

    def search(self, query: Optional[str], *, max_records: Optional[int], kinds: Optional[List[str]], workspace_id: Optional[str], run_id: Optional[str], mode: Optional[str], token_budget: Optional[int], claim_keys: Optional[List[str]], explain: bool, user_id: Optional[str], filter: Optional[Mapping[str, Any]] = None) -> _Call[RecallResult]:
        body = _drop_none({
            "query": query,
            "filter": dict(filter) if filter is not None else None,
            "max_records": max_records,
            "kinds": kinds,
            "workspace_id": workspace_id,
            "run_id": run_id,
            "mode": mode,
            "token_budget": token_budget,
            "claim_keys": claim_keys,
        })
        if explain:
            body["explain"] = True
        return _Call("POST", "/v1/recall", RecallResult.from_json, body, user_id=self._user(user_id))

    def put_item(self, namespace: Sequence[str], key: str, content: str, metadata: Optional[Mapping[str, Any]], ttl_ms: Optional[int], workspace_id: Optional[str], user_id: Optional[str]) -> _Call[WriteResult]:
        body = _drop_none({
            "namespace": list(namespace),
            "key": key,
            "content": content,
            "metadata": dict(metadata) if metadata is not None else None,
            "ttl_ms": ttl_ms,
            "workspace_id": workspace_id,
        })
        return _Call("PUT", "/v1/items", WriteResult.from_json, body, user_id=self._user(user_id))

    def get_item(self, namespace: Sequence[str], key: str, workspace_id: Optional[str], user_id: Optional[str]) -> _Call[Memory]:
        return _Call("GET", "/v1/items", Memory.from_json, params=_address(namespace, key, workspace_id), user_id=self._user(user_id))

    def delete_item(self, namespace: Sequence[str], key: str, workspace_id: Optional[str], user_id: Optional[str]) -> _Call[List[Deletion]]:
        return _Call("DELETE", "/v1/items", lambda d: [Deletion.from_json(r) for r in d["revocations"]], params=_address(namespace, key, workspace_id), user_id=self._user(user_id))

    def namespaces(self, prefix: Optional[Sequence[str]], suffix: Optional[Sequence[str]], max_depth: Optional[int], limit: Optional[int], offset: Optional[int], workspace_id: Optional[str], user_id: Optional[str]) -> _Call[List[Tuple[str, ...]]]:
        params = _drop_none({
            "prefix": "/".join(prefix) if prefix else None,
            "suffix": "/".join(suffix) if suffix else None,
            "max_depth": str(max_depth) if max_depth is not None else None,
            "limit": str(limit) if limit is not None else None,
            "offset": str(offset) if offset else None,
        })
        if workspace_id is not None:
            params.update({"type": "workspace", "workspace_id": workspace_id})
        return _Call("GET", "/v1/namespaces", lambda d: [tuple(ns) for ns in d["namespaces"]], params=params, user_id=self._user(user_id))

    def get(self, record_id: str, user_id: Optional[str]) -> _Call[Memory]:
        return _Call("GET", f"/v1/memories/{_segment(record_id)}", Memory.from_json, user_id=self._user(user_id))

    def list(self, subject: str, principal_id: Optional[str], workspace_id: Optional[str], run_id: Optional[str], procedure_id: Optional[str], user_id: Optional[str]) -> _Call[List[ListedMemory]]:
        params = _drop_none({
            "type": subject,
            "principal_id": principal_id,
            "workspace_id": workspace_id,
            "run_id": run_id,
            "procedure_id": procedure_id,
        })
        return _Call("GET", "/v1/memories", lambda d: [ListedMemory.from_json(e) for e in d], params=params, user_id=self._user(user_id))

    def delete(self, record_id: str, authority_ref: Optional[str], user_id: Optional[str]) -> _Call[Deletion]:
        body = _drop_none({"authority_ref": authority_ref})
        return _Call("POST", f"/v1/memories/{_segment(record_id)}/revoke", Deletion.from_json, body, user_id=self._user(user_id))

    def deletion(self, record_id: str, user_id: Optional[str]) -> _Call[Deletion]:
        return _Call("GET", f"/v1/memories/{_segment(record_id)}/deletion", Deletion.from_json, user_id=self._user(user_id))

    def record_history(self, record_id: str, user_id: Optional[str]) -> _Call[Dict[str, Any]]:
        return _Call("GET", f"/v1/memories/{_segment(record_id)}/history", dict, user_id=self._user(user_id))

    def delete_all(self, user_id: Optional[str]) -> _Call[Erasure]:
        return _Call("POST", "/v1/erasure", Erasure.from_json, {}, user_id=self._user(user_id))

    def export(self, user_id: Optional[str]) -> _Call[str]:
        return _Call("GET", "/v1/export", str, user_id=self._user(user_id), text=True)

    def import_memories(self, lines: Union[str, Iterable[str]], user_id: Optional[str]) -> List[_Call[Dict[str, Any]]]:
        return [
            _Call("POST", "/v1/import", lambda d, offset=offset: _shifted(d, offset), user_id=self._user(user_id), content=body)
            for offset, body in _import_chunks(lines)
        ]

    def verify_deletion(self, receipt: Union[DeletionReceipt, Mapping[str, Any]]) -> _Call[Verification]:
        body = receipt.to_json() if isinstance(receipt, DeletionReceipt) else dict(receipt)
        return _Call("POST", "/v1/verify", Verification.from_json, {"kind": "deletion", "receipt": body})

    def verify_write(
        self,
        proposal_id: str,
        receipt: Optional[Mapping[str, Any]] = None,
        receipt_signature: Optional[Mapping[str, Any]] = None,
    ) -> _Call[Verification]:
        body: Dict[str, Any] = {"kind": "write", "proposal_id": proposal_id}
        if receipt is not None:
            body["receipt"] = dict(receipt)
        if receipt_signature is not None:
            body["receipt_signature"] = dict(receipt_signature)
        return _Call("POST", "/v1/verify", Verification.from_json, body)

    def policy(self, user_id: Optional[str]) -> _Call[Dict[str, Any]]:
        return _Call("GET", "/v1/policy", lambda d: d, user_id=self._user(user_id))

    def whoami(self, user_id: Optional[str]) -> _Call[Dict[str, Any]]:
        return _Call("GET", "/v1/whoami", lambda d: d, user_id=self._user(user_id))

    def create_tenant(self, tenant_id: str, policy: Optional[Mapping[str, Any]]) -> _Call[Dict[str, Any]]:
        body = _drop_none({"tenant_id": tenant_id, "policy": dict(policy) if policy is not None else None})
        return _Call("POST", "/v1/admin/tenants", lambda d: d, body)

    def create_key(self, tenant_id: str, principal_id: str, grant: Optional[Mapping[str, Any]]) -> _Call[Dict[str, Any]]:
        body = _drop_none({"tenant_id": tenant_id, "principal_id": principal_id, "grant": dict(grant) if grant is not None else None})
        return _Call("POST", "/v1/admin/keys", lambda d: d, body)

    def receipt_keys(self) -> _Call[Dict[str, Any]]:
        return _Call("GET", "/v1/keys", lambda d: d)


def _headers(api_key: Optional[str]) -> Dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": "mosaic-memory-python/0.1.0"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _decode(call: _Call[T], response: httpx.Response) -> T:
    if call.text and response.status_code < 400:
        try:
            return call.decode(response.content.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise MosaicError("invalid_response", f"{call.method} {call.path}: the response is not UTF-8 text", response.status_code) from e
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 400:
        raise error_from_response(response.status_code, body)
    if body is None:
        raise MosaicError("invalid_response", f"{call.method} {call.path}: the response is not JSON", response.status_code)
    try:
        return call.decode(body)
    except (KeyError, TypeError, ValueError) as e:
        raise MosaicError("invalid_response", f"{call.method} {call.path}: unexpected response shape ({e})", response.status_code) from e


def _request_kwargs(call: _Call[Any]) -> Dict[str, Any]:
    kwargs: Dict[str, Any] = {}
    headers: Dict[str, str] = {}
    if call.json is not None:
        kwargs["json"] = call.json
    if call.content is not None:
        kwargs["content"] = call.content.encode("utf-8")
        headers["Content-Type"] = JSON_LINES
    if call.text:
        headers["Accept"] = JSON_LINES
    if call.params:
        kwargs["params"] = call.params
    if call.user_id is not None:
        headers[USER_HEADER] = call.user_id
    if headers:
        kwargs["headers"] = headers
    return kwargs


def _deletion_receipt(value: Union[DeletionReceipt, Deletion, Mapping[str, Any]]) -> Union[DeletionReceipt, Mapping[str, Any]]:
    """The receipt a deletion verification checks: a :class:`Deletion`
    carries it once the deletion is finalized."""
    if isinstance(value, Deletion):
        if value.receipt is None:
            raise MosaicError(
                "deletion_not_finalized",
                f"the deletion of {value.record_id} has no receipt yet; fetch it again with deletion() once it is finalized",
                None,
            )
        return value.receipt
    return value


def _held_write(value: Union[WriteResult, Memory]) -> Dict[str, Any]:
    """The receipt and signature a write result holds, for the server to
    check against the stored receipt (a stored memory holds neither: its
    stored receipt is re-verified alone)."""
    if isinstance(value, WriteResult) and value.receipt:
        return {"receipt": value.receipt, "receipt_signature": value.raw.get("receipt_signature")}
    return {}


def _backoff(attempt: int) -> float:
    """Seconds to wait before retrying a rate-limited request (429: the
    server did not run it, so a retry is safe)."""
    return min(2.0, 0.2 * (2**attempt))


#: Longest pause a ``Retry-After`` header can impose on one retry.
MAX_RETRY_AFTER = 60.0


def _retry_pause(attempt: int, headers: Any) -> float:
    """Seconds to wait before retry ``attempt`` of a 429: the server's
    ``Retry-After`` (whole seconds, at most :data:`MAX_RETRY_AFTER`) when
    it sends one, else the growing :func:`_backoff`."""
    value = headers.get("retry-after") if headers is not None else None
    try:
        seconds = float(int(str(value).strip()))
    except (TypeError, ValueError):
        return _backoff(attempt)
    if seconds < 0:
        return _backoff(attempt)
    return min(MAX_RETRY_AFTER, seconds)


class Mosaic:
    """A synchronous client.

    ``api_key`` defaults to ``$MOSAIC_KEY`` and ``base_url`` to
    ``$MOSAIC_URL`` (else ``http://127.0.0.1:7070``). Tenant and principal
    always come from the key. ``user_id`` (here or per call) is sent as
    the ``X-Mosaic-User`` header, which only an *application key* (one
    acting for an app's end users) may use; leave it unset with a
    principal's own key. A rate-limited request (429) is retried up to
    ``max_retries`` times, after the server's ``Retry-After`` (else a
    growing pause), then raises :class:`RateLimitedError`.
    """

    def __init__(self, api_key: Optional[str] = None, base_url: Optional[str] = None, *, user_id: Optional[str] = None, timeout: float = 30.0, max_retries: int = 3, http_client: Optional[httpx.Client] = None) -> None:
        api_key = api_key if api_key is not None else os.environ.get("MOSAIC_KEY")
        base_url = (base_url or os.environ.get("MOSAIC_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._api = _Api(user_id)
        self.max_retries = max_retries
        self._http = http_client or httpx.Client(base_url=base_url, headers=_headers(api_key), timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Mosaic":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _send(self, call: _Call[T]) -> T:
        for attempt in range(self.max_retries + 1):
            try:
                response = self._http.request(call.method, call.path, **_request_kwargs(call))
            except httpx.HTTPError as e:
                raise ConnectionFailed("connection", f"{call.method} {call.path}: {type(e).__name__}: {e}") from e
            if response.status_code != 429 or attempt == self.max_retries:
                break
            time.sleep(_retry_pause(attempt, response.headers))
        return _decode(call, response)

    def add_messages(self, conversation_id: str, messages: Iterable[Message], *, workspace_id: Optional[str] = None, user_id: Optional[str] = None) -> IngestResult:
        """Adds messages of a conversation; each becomes an episodic memory
        through the write gate. A message is a dict (``role``, ``content``,
        optional ``id``, ``name``, ``created_at``) or a plain string (a user
        message). Replaying the same messages adds nothing. A message
        without text (a tool-call or image-only turn) is skipped and listed
        in ``skipped``; the others are kept."""
        return self._send(self._api.add_messages(conversation_id, messages, workspace_id, user_id))

    def add_fact(self, content: str, cites: Iterable[Cite], *, claims: Optional[List[Any]] = None, workspace_id: Optional[str] = None, consent_receipt_sha256: Optional[str] = None, judgments: Optional[List[Any]] = None, supersedes_record_id: Optional[str] = None, expected_line_generation: Optional[int] = None, ttl_ms: Optional[int] = None, user_id: Optional[str] = None) -> WriteResult:
        """Proposes a fact resting on captured messages (``cites``: dicts
        with ``conversation_id`` and ``message_id``, or pairs). A verbatim
        quote of a cited message is supported; the result says whether the
        gate accepted it (``accepted``) and why not (``violations``)."""
        return self._send(self._api.add_fact(content, cites, claims=claims, workspace_id=workspace_id, consent_receipt_sha256=consent_receipt_sha256, judgments=judgments, supersedes_record_id=supersedes_record_id, expected_line_generation=expected_line_generation, ttl_ms=ttl_ms, user_id=user_id))

    def give_consent(self, purpose: str = "personalization", ui_release: str = "mosaic-memory-python", *, consent_id: Optional[str] = None, user_id: Optional[str] = None) -> Consent:
        """Records the principal's consent (principal facts rely on it)."""
        return self._send(self._api.give_consent(purpose, ui_release, consent_id, user_id))

    def search(self, query: Optional[str] = None, *, max_records: Optional[int] = None, kinds: Optional[List[str]] = None, workspace_id: Optional[str] = None, run_id: Optional[str] = None, mode: Optional[str] = None, token_budget: Optional[int] = None, claim_keys: Optional[List[str]] = None, filter: Optional[Mapping[str, Any]] = None, user_id: Optional[str] = None) -> RecallResult:
        """Recalls memories (ranked by ``query`` when given). ``filter`` is
        the server's read filter (mem0's shape: ``AND`` / ``OR`` / ``NOT``,
        fields of metadata and the address, ``eq`` ... ``nin``, a
        namespace ``prefix``), applied before ranking."""
        return self._send(self._api.search(query, max_records=max_records, kinds=kinds, workspace_id=workspace_id, run_id=run_id, mode=mode, token_budget=token_budget, claim_keys=claim_keys, explain=False, user_id=user_id, filter=filter))

    def explain(self, query: Optional[str] = None, *, max_records: Optional[int] = None, kinds: Optional[List[str]] = None, workspace_id: Optional[str] = None, run_id: Optional[str] = None, mode: Optional[str] = None, token_budget: Optional[int] = None, claim_keys: Optional[List[str]] = None, filter: Optional[Mapping[str, Any]] = None, user_id: Optional[str] = None) -> RecallResult:
        """A recall that also lists the selector's decision on every
        candidate (``decisions``)."""
        return self._send(self._api.search(query, max_records=max_records, kinds=kinds, workspace_id=workspace_id, run_id=run_id, mode=mode, token_budget=token_budget, claim_keys=claim_keys, explain=True, user_id=user_id, filter=filter))

    def put_item(self, namespace: Sequence[str], key: str, content: str, *, metadata: Optional[Mapping[str, Any]] = None, ttl_ms: Optional[int] = None, workspace_id: Optional[str] = None, user_id: Optional[str] = None) -> WriteResult:
        """Writes ``content`` at the address ``(namespace, key)`` in one
        request (``PUT /v1/items``): a fact about the principal (or
        knowledge of ``workspace_id``) whose source the server builds from
        the statement; a current record at the address is superseded."""
        return self._send(self._api.put_item(namespace, key, content, metadata, ttl_ms, workspace_id, user_id))

    def get_item(self, namespace: Sequence[str], key: str, *, workspace_id: Optional[str] = None, user_id: Optional[str] = None) -> Memory:
        """The current memory at an address (``GET /v1/items``, one indexed
        read); :class:`NotFoundError` when there is none."""
        return self._send(self._api.get_item(namespace, key, workspace_id, user_id))

    def delete_item(self, namespace: Sequence[str], key: str, *, workspace_id: Optional[str] = None, user_id: Optional[str] = None) -> List[Deletion]:
        """Revokes every version at an address (``DELETE /v1/items``);
        :class:`NotFoundError` when it holds nothing."""
        return self._send(self._api.delete_item(namespace, key, workspace_id, user_id))

    def namespaces(self, *, prefix: Optional[Sequence[str]] = None, suffix: Optional[Sequence[str]] = None, max_depth: Optional[int] = None, limit: Optional[int] = None, offset: Optional[int] = None, workspace_id: Optional[str] = None, user_id: Optional[str] = None) -> List[Tuple[str, ...]]:
        """The namespaces of the current addressed memories (``GET
        /v1/namespaces``); ``prefix`` / ``suffix`` segments may be ``*``."""
        return self._send(self._api.namespaces(prefix, suffix, max_depth, limit, offset, workspace_id, user_id))

    def get(self, record_id: str, *, user_id: Optional[str] = None) -> Memory:
        """One memory with its content and state."""
        return self._send(self._api.get(record_id, user_id))

    def list(self, subject: str = "principal", *, principal_id: Optional[str] = None, workspace_id: Optional[str] = None, run_id: Optional[str] = None, procedure_id: Optional[str] = None, user_id: Optional[str] = None) -> List[ListedMemory]:
        """Memories about one subject, in every state (identities only).
        ``subject`` is ``principal`` (default: the key's own principal),
        ``principal_in_workspace``, ``workspace``, ``run`` or ``procedure``."""
        if subject in ("principal", "principal_in_workspace") and principal_id is None:
            principal_id = self.whoami(user_id=user_id)["credential"]["principal_id"]
        return self._send(self._api.list(subject, principal_id, workspace_id, run_id, procedure_id, user_id))

    def delete(self, record_id: str, *, authority_ref: Optional[str] = None, user_id: Optional[str] = None) -> Deletion:
        """Revokes a memory; returns its deletion with the receipt once finalized."""
        return self._send(self._api.delete(record_id, authority_ref, user_id))

    def deletion(self, record_id: str, *, user_id: Optional[str] = None) -> Deletion:
        """Where a memory's deletion is; once finalized, its receipt and the
        receipt's audit event proven in a signed tree head (``raw["audit_proof"]``)."""
        return self._send(self._api.deletion(record_id, user_id))

    def delete_all(self, *, user_id: Optional[str] = None) -> Erasure:
        """Erases every memory about or by the key's principal and withdraws
        its consents; returns every deletion receipt."""
        return self._send(self._api.delete_all(user_id))

    def export(self, *, user_id: Optional[str] = None) -> str:
        """The principal's live memories as JSON lines (``GET /v1/export``),
        the text exactly as the server sent it: the messages captured from
        conversations first, then the other memories with the requests
        that made them. Write it to a file; :meth:`import_memories` takes
        it back unchanged."""
        return self._send(self._api.export(user_id))

    def import_memories(self, lines: Union[str, Iterable[str]], *, user_id: Optional[str] = None) -> ImportResult:
        """Imports export lines (``POST /v1/import``) in order under the
        key: each message is captured again, each memory proposed again,
        the gate deciding each afresh; a line the server already holds
        replays. ``lines`` is an export's text or its lines (an open file
        will do). Lines go 100 a request (at most 512 KiB), numbered in the
        result as given; a request that fails raises, and the lines before
        it stay imported (importing them again replays them)."""
        return _imported([self._send(call) for call in self._api.import_memories(lines, user_id)])

    def history(self, record_id: str, *, user_id: Optional[str] = None) -> History:
        """What the API exposes of a memory's history (see :class:`History`)."""
        memory: Optional[Memory]
        try:
            memory = self.get(record_id, user_id=user_id)
        except MosaicError as e:
            if e.status != 404:
                raise
            memory = None
        deletion: Optional[Deletion]
        try:
            deletion = self._send(self._api.deletion(record_id, user_id))
        except MosaicError as e:
            if e.status != 404:
                raise
            deletion = None
        if memory is None and deletion is None:
            raise error_from_response(404, {"error": {"code": "not_found", "message": f"memory not found: {record_id}"}})
        record: Optional[Dict[str, Any]]
        try:
            record = self._send(self._api.record_history(record_id, user_id))
        except MosaicError as e:
            if e.status != 404:
                raise
            record = None
        return History(memory=memory, deletion=deletion, record=record)

    def verify_deletion(self, receipt: Union[DeletionReceipt, Mapping[str, Any]]) -> Verification:
        """Has the server recompute a deletion receipt's digest."""
        return self._send(self._api.verify_deletion(receipt))

    def verify_write(
        self,
        proposal_id: str,
        *,
        receipt: Optional[Mapping[str, Any]] = None,
        receipt_signature: Optional[Mapping[str, Any]] = None,
    ) -> Verification:
        """Re-verifies a stored write receipt from its stored inputs; given
        the ``receipt`` and ``receipt_signature`` a write answered, also
        checks that they are that stored receipt and the server's signature
        over it, made inside its key's validity window."""
        return self._send(self._api.verify_write(proposal_id, receipt, receipt_signature))

    def verify(self, receipt: Union[DeletionReceipt, Deletion, WriteResult, Memory, Mapping[str, Any]]) -> Verification:
        """Verifies a deletion receipt (or the receipt of a :class:`Deletion`),
        the write receipt of a write result (with the receipt and signature
        it holds) or the stored write receipt of a memory."""
        if isinstance(receipt, (WriteResult, Memory)):
            return self.verify_write(receipt.proposal_id, **_held_write(receipt))
        return self.verify_deletion(_deletion_receipt(receipt))

    def whoami(self, *, user_id: Optional[str] = None) -> Dict[str, Any]:
        """The key's credential and grant."""
        return self._send(self._api.whoami(user_id))

    def receipt_keys(self) -> Dict[str, Any]:
        """The server's receipt-signing public keys (``GET /v1/keys``): keep
        them to check receipts offline with
        :func:`mosaic_memory.offline.verify_receipt`."""
        return self._send(self._api.receipt_keys())

    def policy(self, *, user_id: Optional[str] = None) -> Dict[str, Any]:
        """The tenant's write policy (``max_ttl_ms``, ``allowed_kinds``, ...)."""
        return self._send(self._api.policy(user_id))

    def create_tenant(self, tenant_id: str, *, policy: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Creates a tenant (needs the admin key, ``<data-dir>/admin.key``),
        with the default policy unless ``policy`` is given."""
        return self._send(self._api.create_tenant(tenant_id, policy))

    def create_key(self, tenant_id: str, principal_id: str, *, grant: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Creates an API key for one principal of a tenant (needs the admin
        key). The answer's ``key`` is the secret, shown only this once:
        pass it to ``Mosaic(key, url)``."""
        return self._send(self._api.create_key(tenant_id, principal_id, grant))


class AsyncMosaic:
    """The asynchronous client: the same methods as :class:`Mosaic`, as
    coroutines."""

    def __init__(self, api_key: Optional[str] = None, base_url: Optional[str] = None, *, user_id: Optional[str] = None, timeout: float = 30.0, max_retries: int = 3, http_client: Optional[httpx.AsyncClient] = None) -> None:
        api_key = api_key if api_key is not None else os.environ.get("MOSAIC_KEY")
        base_url = (base_url or os.environ.get("MOSAIC_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._api = _Api(user_id)
        self.max_retries = max_retries
        self._http = http_client or httpx.AsyncClient(base_url=base_url, headers=_headers(api_key), timeout=timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncMosaic":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _send(self, call: _Call[T]) -> T:
        for attempt in range(self.max_retries + 1):
            try:
                response = await self._http.request(call.method, call.path, **_request_kwargs(call))
            except httpx.HTTPError as e:
                raise ConnectionFailed("connection", f"{call.method} {call.path}: {type(e).__name__}: {e}") from e
            if response.status_code != 429 or attempt == self.max_retries:
                break
            await asyncio.sleep(_retry_pause(attempt, response.headers))
        return _decode(call, response)

    async def add_messages(self, conversation_id: str, messages: Iterable[Message], *, workspace_id: Optional[str] = None, user_id: Optional[str] = None) -> IngestResult:
        return await self._send(self._api.add_messages(conversation_id, messages, workspace_id, user_id))

    async def add_fact(self, content: str, cites: Iterable[Cite], *, claims: Optional[List[Any]] = None, workspace_id: Optional[str] = None, consent_receipt_sha256: Optional[str] = None, judgments: Optional[List[Any]] = None, supersedes_record_id: Optional[str] = None, expected_line_generation: Optional[int] = None, ttl_ms: Optional[int] = None, user_id: Optional[str] = None) -> WriteResult:
        return await self._send(self._api.add_fact(content, cites, claims=claims, workspace_id=workspace_id, consent_receipt_sha256=consent_receipt_sha256, judgments=judgments, supersedes_record_id=supersedes_record_id, expected_line_generation=expected_line_generation, ttl_ms=ttl_ms, user_id=user_id))

    async def give_consent(self, purpose: str = "personalization", ui_release: str = "mosaic-memory-python", *, consent_id: Optional[str] = None, user_id: Optional[str] = None) -> Consent:
        return await self._send(self._api.give_consent(purpose, ui_release, consent_id, user_id))

    async def search(self, query: Optional[str] = None, *, max_records: Optional[int] = None, kinds: Optional[List[str]] = None, workspace_id: Optional[str] = None, run_id: Optional[str] = None, mode: Optional[str] = None, token_budget: Optional[int] = None, claim_keys: Optional[List[str]] = None, filter: Optional[Mapping[str, Any]] = None, user_id: Optional[str] = None) -> RecallResult:
        return await self._send(self._api.search(query, max_records=max_records, kinds=kinds, workspace_id=workspace_id, run_id=run_id, mode=mode, token_budget=token_budget, claim_keys=claim_keys, explain=False, user_id=user_id, filter=filter))

    async def explain(self, query: Optional[str] = None, *, max_records: Optional[int] = None, kinds: Optional[List[str]] = None, workspace_id: Optional[str] = None, run_id: Optional[str] = None, mode: Optional[str] = None, token_budget: Optional[int] = None, claim_keys: Optional[List[str]] = None, filter: Optional[Mapping[str, Any]] = None, user_id: Optional[str] = None) -> RecallResult:
        return await self._send(self._api.search(query, max_records=max_records, kinds=kinds, workspace_id=workspace_id, run_id=run_id, mode=mode, token_budget=token_budget, claim_keys=claim_keys, explain=True, user_id=user_id, filter=filter))

    async def put_item(self, namespace: Sequence[str], key: str, content: str, *, metadata: Optional[Mapping[str, Any]] = None, ttl_ms: Optional[int] = None, workspace_id: Optional[str] = None, user_id: Optional[str] = None) -> WriteResult:
        return await self._send(self._api.put_item(namespace, key, content, metadata, ttl_ms, workspace_id, user_id))

    async def get_item(self, namespace: Sequence[str], key: str, *, workspace_id: Optional[str] = None, user_id: Optional[str] = None) -> Memory:
        return await self._send(self._api.get_item(namespace, key, workspace_id, user_id))

    async def delete_item(self, namespace: Sequence[str], key: str, *, workspace_id: Optional[str] = None, user_id: Optional[str] = None) -> List[Deletion]:
        return await self._send(self._api.delete_item(namespace, key, workspace_id, user_id))

    async def namespaces(self, *, prefix: Optional[Sequence[str]] = None, suffix: Optional[Sequence[str]] = None, max_depth: Optional[int] = None, limit: Optional[int] = None, offset: Optional[int] = None, workspace_id: Optional[str] = None, user_id: Optional[str] = None) -> List[Tuple[str, ...]]:
        return await self._send(self._api.namespaces(prefix, suffix, max_depth, limit, offset, workspace_id, user_id))

    async def get(self, record_id: str, *, user_id: Optional[str] = None) -> Memory:
        return await self._send(self._api.get(record_id, user_id))

    async def list(self, subject: str = "principal", *, principal_id: Optional[str] = None, workspace_id: Optional[str] = None, run_id: Optional[str] = None, procedure_id: Optional[str] = None, user_id: Optional[str] = None) -> List[ListedMemory]:
        if subject in ("principal", "principal_in_workspace") and principal_id is None:
            principal_id = (await self.whoami(user_id=user_id))["credential"]["principal_id"]
        return await self._send(self._api.list(subject, principal_id, workspace_id, run_id, procedure_id, user_id))

    async def delete(self, record_id: str, *, authority_ref: Optional[str] = None, user_id: Optional[str] = None) -> Deletion:
        return await self._send(self._api.delete(record_id, authority_ref, user_id))

    async def deletion(self, record_id: str, *, user_id: Optional[str] = None) -> Deletion:
        """See :meth:`Mosaic.deletion`."""
        return await self._send(self._api.deletion(record_id, user_id))

    async def delete_all(self, *, user_id: Optional[str] = None) -> Erasure:
        return await self._send(self._api.delete_all(user_id))

    async def export(self, *, user_id: Optional[str] = None) -> str:
        """See :meth:`Mosaic.export`."""
        return await self._send(self._api.export(user_id))

    async def import_memories(self, lines: Union[str, Iterable[str]], *, user_id: Optional[str] = None) -> ImportResult:
        """See :meth:`Mosaic.import_memories` (the requests go one after
        another, in order)."""
        return _imported([await self._send(call) for call in self._api.import_memories(lines, user_id)])

    async def history(self, record_id: str, *, user_id: Optional[str] = None) -> History:
        memory: Optional[Memory]
        try:
            memory = await self.get(record_id, user_id=user_id)
        except MosaicError as e:
            if e.status != 404:
                raise
            memory = None
        deletion: Optional[Deletion]
        try:
            deletion = await self._send(self._api.deletion(record_id, user_id))
        except MosaicError as e:
            if e.status != 404:
                raise
            deletion = None
        if memory is None and deletion is None:
            raise error_from_response(404, {"error": {"code": "not_found", "message": f"memory not found: {record_id}"}})
        record: Optional[Dict[str, Any]]
        try:
            record = await self._send(self._api.record_history(record_id, user_id))
        except MosaicError as e:
            if e.status != 404:
                raise
            record = None
        return History(memory=memory, deletion=deletion, record=record)

    async def verify_deletion(self, receipt: Union[DeletionReceipt, Mapping[str, Any]]) -> Verification:
        return await self._send(self._api.verify_deletion(receipt))

    async def verify_write(
        self,
        proposal_id: str,
        *,
        receipt: Optional[Mapping[str, Any]] = None,
        receipt_signature: Optional[Mapping[str, Any]] = None,
    ) -> Verification:
        return await self._send(self._api.verify_write(proposal_id, receipt, receipt_signature))

    async def verify(self, receipt: Union[DeletionReceipt, Deletion, WriteResult, Memory, Mapping[str, Any]]) -> Verification:
        if isinstance(receipt, (WriteResult, Memory)):
            return await self.verify_write(receipt.proposal_id, **_held_write(receipt))
        return await self.verify_deletion(_deletion_receipt(receipt))

    async def whoami(self, *, user_id: Optional[str] = None) -> Dict[str, Any]:
        return await self._send(self._api.whoami(user_id))

    async def receipt_keys(self) -> Dict[str, Any]:
        return await self._send(self._api.receipt_keys())

    async def policy(self, *, user_id: Optional[str] = None) -> Dict[str, Any]:
        return await self._send(self._api.policy(user_id))

    async def create_tenant(self, tenant_id: str, *, policy: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        return await self._send(self._api.create_tenant(tenant_id, policy))

    async def create_key(self, tenant_id: str, principal_id: str, *, grant: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        return await self._send(self._api.create_key(tenant_id, principal_id, grant))
