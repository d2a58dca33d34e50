"""A LangGraph ``BaseStore`` backed by Mosaic Memory.

How items map onto Mosaic (see the package README for what follows):

- ``put(namespace, key, value)`` captures the item as one message of a
  conversation named after the namespace (``POST
  /v1/conversations/lg.<digest>/messages``: an episodic memory, the
  evidence) and proposes a fact citing it whose content is the item's
  envelope, the JSON text ``{"langgraph_store": 1, "namespace": [...],
  "key": ..., "value": {...}}`` (``POST /v1/facts``: a semantic memory,
  the item). A verbatim quote of a captured message is supported by the
  server's capture verifier, so the gate accepts it when the key's grant,
  the tenant's policy and the principal's consent allow; when it refuses,
  the captured message is deleted again and :class:`StoreWriteRefused`
  is raised with the gate's violations. Nothing is dropped silently.
- A new value for an existing key supersedes the current fact (same line,
  next generation); the earlier value stays in the store as the line's
  history and is never returned again.
- ``delete`` (``put`` with ``None``) revokes every record of the key: each
  fact generation and each captured message, each with a deletion receipt.
- ``get``, ``search`` and ``list_namespaces`` read the principal's memory
  list (``GET /v1/memories``) and the records' contents (``GET
  /v1/memories/{id}``, cached: a record's content never changes). A search
  with a ``query`` is ranked by Mosaic's recall (``POST /v1/recall``, the
  server's lexical and vector indexes); ``filter`` is applied to the values
  here, as ``InMemoryStore`` applies it.
- TTL (minutes) becomes the fact's ``ttl_ms``; an item put without one
  asks for the tenant policy's longest lifetime (``max_ttl_ms``), since
  Mosaic keeps no memory forever. Expiry counts from the write: Mosaic
  cannot extend a record's expiry on read, so ``refresh_ttl`` has no
  effect and ``TTLConfig(refresh_on_read=True)`` is refused.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Optional, Tuple

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from .client import Mosaic
from .errors import MosaicError, NotFoundError, RefusedError
from .types import Memory, Violation

__all__ = ["MosaicStore", "StoreWriteRefused", "ENVELOPE_VERSION"]

#: The envelope's version member.
ENVELOPE_VERSION = 1
#: The speaker name of captured items.
SPEAKER = "langgraph-store"
_PREFIX = SPEAKER + ": "

Namespace = Tuple[str, ...]


class StoreWriteRefused(RefusedError):
    """The write gate refused a ``put``; nothing of it was kept."""


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()


def _conversation_id(namespace: Namespace) -> str:
    return "lg." + _digest(list(namespace))[:40]


def _envelope(namespace: Namespace, key: str, value: Dict[str, Any]) -> str:
    try:
        return json.dumps(
            {"langgraph_store": ENVELOPE_VERSION, "namespace": list(namespace), "key": key, "value": value},
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"MosaicStore keeps values as JSON text; this value is not JSON-serializable ({e})"
        ) from e


def _parse(content: str) -> Optional[Tuple[Namespace, str, Dict[str, Any]]]:
    text = content[len(_PREFIX):] if content.startswith(_PREFIX) else content
    if not text.startswith('{"langgraph_store":'):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("langgraph_store") != ENVELOPE_VERSION:
        return None
    ns, key, value = data.get("namespace"), data.get("key"), data.get("value")
    if not isinstance(ns, list) or not isinstance(key, str) or not isinstance(value, dict):
        return None
    return tuple(str(x) for x in ns), key, value


class _Record:
    """A stored record that holds a store item's envelope."""

    __slots__ = ("record_id", "kind", "namespace", "key", "value", "created_ms", "expires_ms", "line_generation")

    def __init__(self, memory: Memory, parsed: Tuple[Namespace, str, Dict[str, Any]]) -> None:
        self.record_id = memory.record_id
        self.kind = memory.kind
        self.namespace, self.key, self.value = parsed
        self.created_ms = memory.created_at_unix_ms
        self.expires_ms = memory.expires_at_unix_ms
        self.line_generation = memory.line_generation


class _Snapshot:
    """The store's items as the server lists them at one instant."""

    def __init__(self) -> None:
        self.items: Dict[Tuple[Namespace, str], Tuple[_Record, datetime]] = {}
        self.records: Dict[Tuple[Namespace, str], List[Tuple[_Record, str]]] = {}

    def item(self, ns: Namespace, key: str) -> Optional[Item]:
        found = self.items.get((ns, key))
        if found is None:
            return None
        rec, created = found
        return Item(value=dict(rec.value), key=key, namespace=ns, created_at=created, updated_at=_ms(rec.created_ms))


def _ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _matches_filter(value: Any, flt: Any) -> bool:
    if isinstance(flt, dict):
        if any(k.startswith("$") for k in flt):
            return all(_operator(value, op, arg) for op, arg in flt.items())
        if not isinstance(value, dict):
            return False
        return all(_matches_filter(value.get(k), v) for k, v in flt.items())
    if isinstance(flt, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(flt)
            and all(_matches_filter(a, b) for a, b in zip(value, flt))
        )
    return value == flt


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return value == arg
    if op == "$ne":
        return value != arg
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if value is None:
            return False
        a, b = float(value), float(arg)
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(f"unsupported filter operator {op}")


def _namespace_matches(condition: MatchCondition, ns: Namespace) -> bool:
    path = tuple(condition.path)
    if len(ns) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(ns, path)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(ns), reversed(path))
    else:
        raise ValueError(f"unsupported match type {condition.match_type}")
    return all(p == "*" or k == p for k, p in pairs)


class MosaicStore(BaseStore):
    """A LangGraph store whose items are Mosaic memories of the key's
    principal (or of the principal in ``workspace_id``).

    ``client`` is a :class:`mosaic_memory.Mosaic` (default: one from
    ``$MOSAIC_KEY`` / ``$MOSAIC_URL``). Principal facts rely on the
    principal's consent: give it once (``client.give_consent()``).
    ``index`` may name ``fields`` (accepted for compatibility: Mosaic
    indexes the item's whole text) but not ``embed``: the server ranks
    with its own embedder. ``ttl`` is a LangGraph ``TTLConfig``
    (``default_ttl`` in minutes; ``refresh_on_read`` must not be True).
    """

    supports_ttl = True

    def __init__(
        self,
        client: Optional[Mosaic] = None,
        *,
        workspace_id: Optional[str] = None,
        index: Optional[Dict[str, Any]] = None,
        ttl: Optional[TTLConfig] = None,
    ) -> None:
        if index and index.get("embed") is not None:
            raise ValueError(
                "MosaicStore does not take an `embed` function: the Mosaic server embeds "
                "and ranks with its own model (configure it with `mosaic serve --embedder`)"
            )
        if ttl and ttl.get("refresh_on_read"):
            raise ValueError(
                "MosaicStore cannot refresh a TTL on read: a memory's expiry is fixed when "
                "it is written (use TTLConfig(refresh_on_read=False))"
            )
        self.client = client if client is not None else Mosaic(os.environ.get("MOSAIC_KEY"))
        self.workspace_id = workspace_id
        self.index_config = index
        self.ttl_config = ttl
        self._cache: Dict[str, Optional[_Record]] = {}
        self._principal: Optional[str] = None
        self._max_ttl_ms: Optional[int] = None
        self._lock = threading.RLock()

    # ------------------------------------------------------------ reading

    def _principal_id(self) -> str:
        if self._principal is None:
            self._principal = self.client.whoami()["credential"]["principal_id"]
        return self._principal

    def _record(self, record_id: str) -> Optional[_Record]:
        if record_id in self._cache:
            return self._cache[record_id]
        try:
            memory = self.client.get(record_id)
        except NotFoundError:
            return None
        parsed = _parse(memory.content)
        rec = _Record(memory, parsed) if parsed else None
        self._cache[record_id] = rec
        return rec

    def _snapshot(self) -> _Snapshot:
        subject = "principal_in_workspace" if self.workspace_id else "principal"
        entries = self.client.list(subject, principal_id=self._principal_id(), workspace_id=self.workspace_id)
        now_ms = int(time.time() * 1000)
        snap = _Snapshot()
        firsts: Dict[Tuple[Namespace, str], int] = {}
        for entry in entries:
            if entry.state in ("revoked", "erased") or entry.kind not in ("semantic", "episodic"):
                continue
            rec = self._record(entry.record_id)
            if rec is None:
                continue
            ident = (rec.namespace, rec.key)
            snap.records.setdefault(ident, []).append((rec, entry.state))
            if rec.kind == "semantic":
                first = firsts.get(ident)
                firsts[ident] = rec.created_ms if first is None else min(first, rec.created_ms)
            if rec.kind != "semantic" or entry.state != "active":
                continue
            if rec.expires_ms is not None and rec.expires_ms <= now_ms:
                continue
            current = snap.items.get(ident)
            if current is None or (rec.line_generation, rec.created_ms) > (current[0].line_generation, current[0].created_ms):
                snap.items[ident] = (rec, _ms(0))
        for ident, (rec, _) in list(snap.items.items()):
            snap.items[ident] = (rec, _ms(firsts.get(ident, rec.created_ms)))
        return snap

    def _search(self, snap: _Snapshot, op: SearchOp) -> List[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        candidates = [
            (rec, created)
            for (ns, _), (rec, created) in snap.items.items()
            if ns[: len(prefix)] == prefix and (not op.filter or _matches_filter(rec.value, op.filter))
        ]
        candidates.sort(key=lambda c: (c[0].namespace, c[0].key))
        scores: Dict[str, float] = {}
        if op.query and candidates:
            recalled = self.client.search(
                op.query,
                kinds=["semantic"],
                max_records=len(snap.items),
                workspace_id=self.workspace_id,
            )
            order = {hit.record_id: i for i, hit in enumerate(recalled.hits)}
            for hit in recalled.hits:
                if hit.score is not None:
                    scores[hit.record_id] = hit.score
            candidates.sort(key=lambda c: order.get(c[0].record_id, len(order)))
        page = candidates[op.offset : op.offset + op.limit]
        return [
            SearchItem(
                namespace=rec.namespace,
                key=rec.key,
                value=dict(rec.value),
                created_at=created,
                updated_at=_ms(rec.created_ms),
                score=scores.get(rec.record_id) if op.query else None,
            )
            for rec, created in page
        ]

    @staticmethod
    def _list_namespaces(snap: _Snapshot, op: ListNamespacesOp) -> List[Namespace]:
        namespaces = sorted({ns for ns, _ in snap.items})
        if op.match_conditions:
            namespaces = [ns for ns in namespaces if all(_namespace_matches(c, ns) for c in op.match_conditions)]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        return namespaces[op.offset : op.offset + op.limit]

    # ------------------------------------------------------------ writing

    def _ttl_ms(self, ttl: Optional[float]) -> int:
        if self._max_ttl_ms is None:
            self._max_ttl_ms = int(self.client.policy()["max_ttl_ms"])
        if ttl is None:
            return self._max_ttl_ms
        ttl_ms = int(ttl * 60_000)
        if ttl_ms <= 0:
            raise ValueError(f"ttl must be a positive number of minutes, got {ttl}")
        if ttl_ms > self._max_ttl_ms:
            raise ValueError(
                f"ttl of {ttl} minutes exceeds the tenant policy's longest lifetime "
                f"({self._max_ttl_ms / 60_000:g} minutes)"
            )
        return ttl_ms

    def _delete(self, snap: _Snapshot, ns: Namespace, key: str) -> None:
        for rec, _ in snap.records.get((ns, key), []):
            try:
                self.client.delete(rec.record_id)
            except NotFoundError:
                pass
            self._cache.pop(rec.record_id, None)

    def _forget(self, record_id: str) -> None:
        try:
            self.client.delete(record_id)
        except MosaicError:
            pass

    def _put(self, snap: _Snapshot, op: PutOp) -> None:
        ns, key = tuple(op.namespace), str(op.key)
        if op.value is None:
            self._delete(snap, ns, key)
            return
        if not isinstance(op.value, dict):
            op_value = dict(op.value)
        else:
            op_value = op.value
        text = _envelope(ns, key, op_value)
        ttl_ms = self._ttl_ms(op.ttl)
        message_id = "p." + _digest(text, time.time_ns(), os.urandom(8).hex())[:40]
        conversation_id = _conversation_id(ns)
        ingest = self.client.add_messages(
            conversation_id,
            [{"id": message_id, "role": "tool", "name": SPEAKER, "content": text}],
            workspace_id=self.workspace_id,
        )
        captured = ingest.messages[0]
        if not captured.accepted:
            raise StoreWriteRefused(
                f"the write gate refused to capture {ns!r}/{key!r}: " + _reasons(captured.violations),
                captured.violations,
            )
        current = snap.items.get((ns, key))
        try:
            fact = self.client.add_fact(
                text,
                [(conversation_id, message_id)],
                workspace_id=self.workspace_id,
                ttl_ms=ttl_ms,
                supersedes_record_id=current[0].record_id if current else None,
                expected_line_generation=current[0].line_generation if current else None,
            )
        except MosaicError:
            # No half-written item: the captured message goes again.
            self._forget(captured.record_id)
            raise
        if not fact.accepted:
            self._forget(captured.record_id)
            raise StoreWriteRefused(
                f"the write gate refused {ns!r}/{key!r}: " + _reasons(fact.violations),
                fact.violations,
            )
        # What this batch wrote is what later puts of it supersede.
        for record_id in (captured.record_id, fact.record_id):
            self._cache.pop(record_id, None)
        fresh = self._record(fact.record_id)
        if fresh is not None:
            created = current[1] if current else _ms(fresh.created_ms)
            snap.items[(ns, key)] = (fresh, created)
            episode = self._record(captured.record_id)
            snap.records.setdefault((ns, key), []).extend(
                [(fresh, "active")] + ([(episode, "active")] if episode else [])
            )

    # ------------------------------------------------------------ batches

    def batch(self, ops: Iterable[Op]) -> List[Result]:
        """Runs the operations: reads see the store as it was when the batch
        began, then the puts are applied in order (the last put of a key
        wins), as ``InMemoryStore`` does."""
        ops = list(ops)
        with self._lock:
            snap = self._snapshot()
            results: List[Result] = []
            puts: Dict[Tuple[Namespace, str], PutOp] = {}
            for op in ops:
                if isinstance(op, GetOp):
                    results.append(snap.item(tuple(op.namespace), str(op.key)))
                elif isinstance(op, SearchOp):
                    results.append(self._search(snap, op))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(snap, op))
                elif isinstance(op, PutOp):
                    puts.pop((tuple(op.namespace), str(op.key)), None)
                    puts[(tuple(op.namespace), str(op.key))] = op
                    results.append(None)
                else:
                    raise ValueError(f"unknown operation type: {type(op)}")
            for op in puts.values():
                self._put(snap, op)
            return results

    async def abatch(self, ops: Iterable[Op]) -> List[Result]:
        """:meth:`batch` on a worker thread (the sync client's calls block)."""
        ops = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, ops)


def _reasons(violations: List[Violation]) -> str:
    return ", ".join(v.code for v in violations) or "no reason given"
