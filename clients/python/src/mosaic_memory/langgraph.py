"""A LangGraph ``BaseStore`` backed by Mosaic Memory.

How items map onto Mosaic (the package README says the same):

- An item is one semantic memory at the application address
  ``(namespace, key)`` of the key's principal (or, with ``workspace_id``,
  of that workspace). Its content is the envelope, the JSON text
  ``{"langgraph_store": 1, "namespace": [...], "key": ..., "value": {...}}``
  (the value exactly, and the address, so two keys holding the same value
  are two texts). Its metadata is an index of the value for the server's
  filters (see :func:`index_of`).
- ``put`` is one request (``PUT /v1/items``): the server builds the
  source, names the principal's consent, and a write to an address that
  holds an item supersedes it through the write gate (the earlier value
  stays as the line's history and is never served again). A refusal
  raises :class:`StoreWriteRefused` with the gate's violations; nothing is
  dropped silently. ``put(..., None)`` / ``delete`` is one request
  (``DELETE /v1/items``) revoking every version at the address, each with
  a deletion receipt.
- ``get`` is one request (``GET /v1/items``, one indexed read).
- ``search`` is one recall (``POST /v1/recall``) whose filter holds the
  namespace prefix and the translated LangGraph filter, run by the server
  before ranking: ranked by the server's indexes with a ``query``,
  newest first without one. ``limit`` and ``offset`` page the server's
  answer (at most 10,000 items deep).
- ``list_namespaces`` is one request (``GET /v1/namespaces``).
- TTL (minutes) becomes the memory's ``ttl_ms``; without one the tenant
  policy's longest lifetime applies. A memory's expiry is part of its
  record and write receipt, fixed when written, so a read cannot refresh
  it: ``TTLConfig(refresh_on_read=True)`` is refused.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import struct
import time
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Optional, Tuple

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from .client import Mosaic
from .errors import NotFoundError, RefusedError
from .types import Violation

__all__ = ["MosaicStore", "StoreWriteRefused", "ENVELOPE_VERSION", "index_of", "server_filter"]

#: The envelope's version member.
ENVELOPE_VERSION = 1
#: The deepest a search pages (the server's largest selection).
MAX_SEARCH_DEPTH = 10_000
#: Longest string value the metadata index holds (longer ones are found
#: by no server-side equality, which they could not satisfy anyway).
MAX_INDEXED_STRING = 1024
#: The metadata budget the server allows (canonical bytes).
MAX_METADATA_BYTES = 16 * 1024
#: Metadata member marking an item whose index left members out.
PARTIAL = "~partial"

#: Prefix of the members that hold a numeric text or a boolean of the value
#: as a number, so a range filter (which LangGraph decides with ``float``)
#: finds them on the server too.
NUMERIC = "~n."

Namespace = Tuple[str, ...]


class StoreWriteRefused(RefusedError):
    """The write gate refused a ``put``; nothing of it was kept."""


def _ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


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
    if not content.startswith('{"langgraph_store":'):
        return None
    try:
        data = json.loads(content)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("langgraph_store") != ENVELOPE_VERSION:
        return None
    ns, key, value = data.get("namespace"), data.get("key"), data.get("value")
    if not isinstance(ns, list) or not isinstance(key, str) or not isinstance(value, dict):
        return None
    return tuple(str(x) for x in ns), key, value


# ---------------------------------------------------------------- the index

def _number(x: float) -> str:
    """An order-preserving text of a number: ``#`` and the 16 hex digits of
    its IEEE double with the sign bit flipped (negatives: every bit), so
    text order is numeric order and 1 and 1.0 are the same text."""
    bits = struct.unpack(">Q", struct.pack(">d", float(x) + 0.0))[0]
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | (1 << 63)
    return f"#{bits:016x}"


def _scalar(v: Any) -> Tuple[bool, Any]:
    """A value as the index holds it: ``(True, indexed)``, or ``(False,
    None)`` when it is not indexed (a long string, a NaN, an object)."""
    if v is None or isinstance(v, bool):
        return True, v
    if isinstance(v, (int, float)):
        try:
            if not math.isfinite(float(v)):
                return False, None
        except OverflowError:
            return False, None
        return True, _number(v)
    if isinstance(v, str):
        if len(v) > MAX_INDEXED_STRING:
            return False, None
        # Texts starting with '#' get one more, so none looks like a number.
        return True, "#" + v if v.startswith("#") else v
    if isinstance(v, (list, tuple)):
        out = []
        for item in v:
            ok, indexed = _scalar(item)
            if not ok:
                return False, None
            out.append(indexed)
        return True, out
    return False, None


def index_of(value: Dict[str, Any]) -> Dict[str, Any]:
    """The metadata a value is indexed by: each leaf of the value, nested
    objects flattened to dotted names (``{"a": {"b": 1}}`` is member
    ``a.b``), numbers as order-preserving texts (:func:`_number`),
    strings (up to 1,024 characters), booleans, nulls and lists of those
    as they are. When the members exceed the server's 16 KiB the longest
    are left out and :data:`PARTIAL` is set: filters then consider the
    item on the server and decide it here."""
    members: Dict[str, Any] = {}
    partial = False

    def walk(prefix: str, obj: Dict[str, Any]) -> None:
        nonlocal partial
        for k, v in obj.items():
            name = f"{prefix}{k}"
            if not k or k.startswith("~") or len(name) > 128 or any(ord(c) < 32 for c in name):
                partial = True
                continue
            if isinstance(v, dict):
                walk(name + ".", v)
                continue
            if "." in k:
                # "a.b" would be the member of {"a": {"b": ...}} too: the
                # item is decided here instead.
                partial = True
                continue
            ok, indexed = _scalar(v)
            if ok:
                members[name] = indexed
            elif not (isinstance(v, str) and len(v) > MAX_INDEXED_STRING):
                partial = True
            as_number = _as_number(v)
            if as_number is _UNDECIDED or (as_number is not None and len(NUMERIC + name) > 128):
                partial = True
            elif as_number is not None:
                members[NUMERIC + name] = as_number

    walk("", value)

    def size(m: Dict[str, Any]) -> int:
        return len(json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode())

    if size(members) > MAX_METADATA_BYTES - 32:
        partial = True
        for name in sorted(members, key=lambda n: -size({n: members[n]})):
            del members[name]
            if size(members) <= MAX_METADATA_BYTES - 32:
                break
    if partial:
        members[PARTIAL] = True
    return members


_RANGE = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}

#: What :func:`_as_number` answers for a text ``float`` reads as infinite or
#: not a number: the index cannot order it, so the item is decided here.
_UNDECIDED = object()


def _as_number(v: Any) -> Any:
    """The order-preserving text of what LangGraph's range filters compare
    for a boolean or a numeric text (``float(v)``), None for any other value
    (numbers are members already; other texts never compare)."""
    if isinstance(v, bool):
        return _number(float(v))
    if isinstance(v, str) and len(v) <= 64:
        try:
            x = float(v)
        except (ValueError, OverflowError):
            return None
        return _number(x) if math.isfinite(x) else _UNDECIDED
    return None


def _field(name: str) -> str:
    return "metadata." + name


def _conditions(path: str, flt: Any, out: List[Dict[str, Any]]) -> bool:
    """Appends the server conditions that select at least every item whose
    value at ``path`` matches ``flt`` as LangGraph decides it; whether they
    select exactly those."""
    if isinstance(flt, dict) and any(k.startswith("$") for k in flt):
        exact = True
        for op, arg in flt.items():
            if op in ("$eq", "$ne") and not isinstance(arg, dict):
                ok, indexed = _scalar(arg)
                if not ok or arg is None:
                    exact = False
                elif op == "$eq":
                    out.append(_equal(path, arg, indexed))
                else:
                    out.append({_field(path): {"ne": indexed}})
                    exact = exact and not isinstance(arg, (bool, int, float))
            elif op in _RANGE and isinstance(arg, (int, float)) and not isinstance(arg, bool):
                ok, indexed = _scalar(arg)
                if not ok:
                    exact = False
                    continue
                # A number's member, or a numeric text's or a boolean's
                # numeric twin. Texts order after every number, so the
                # server's answer is a superset, decided again here.
                out.append({"OR": [
                    {_field(path): {_RANGE[op]: indexed}},
                    {_field(NUMERIC + path): {_RANGE[op]: indexed}},
                ]})
                exact = False
            elif op in ("$eq", "$ne") or op in _RANGE:
                exact = False
            else:
                raise ValueError(f"unsupported filter operator {op}")
        return exact
    if isinstance(flt, dict):
        exact = True
        for k, v in flt.items():
            exact = _conditions(f"{path}.{k}", v, out) and exact
        return exact
    ok, indexed = _scalar(flt)
    if not ok or flt is None:
        return False
    out.append(_equal(path, flt, indexed))
    return True


def _equal(path: str, arg: Any, indexed: Any) -> Dict[str, Any]:
    # Python's True == 1 and False == 0: either form matches.
    if isinstance(arg, bool) or (isinstance(arg, (int, float)) and arg in (0, 1)):
        twin = bool(arg) if not isinstance(arg, bool) else _number(int(arg))
        return {"OR": [{_field(path): {"eq": indexed}}, {_field(path): {"eq": twin}}]}
    return {_field(path): {"eq": indexed}}


def server_filter(filter: Optional[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], bool]:
    """A LangGraph filter (equality, nested objects, ``$eq`` ``$ne`` ``$gt``
    ``$gte`` ``$lt`` ``$lte`` on value fields) as the server's filter
    conditions over :func:`index_of`'s metadata, and whether they are exact.
    An item with a partial index always passes the server's conditions and
    is decided in the client; a condition the index cannot decide (a null,
    a whole-object ``$eq``, a range on a text) is decided in the client
    alone."""
    out: List[Dict[str, Any]] = []
    if not filter:
        return out, True
    exact = True
    for k, v in filter.items():
        exact = _conditions(k, v, out) and exact
    if out:
        out = [{"OR": [{"AND": out} if len(out) > 1 else out[0], {_field(PARTIAL): True}]}]
    return out, exact


def _matches(value: Any, flt: Any) -> bool:
    """LangGraph's own filter semantics (``InMemoryStore``), a value that
    cannot be compared matching nothing."""
    if isinstance(flt, dict):
        if any(k.startswith("$") for k in flt):
            return all(_operator(value, op, arg) for op, arg in flt.items())
        if not isinstance(value, dict):
            return False
        return all(_matches(value.get(k), v) for k, v in flt.items())
    if isinstance(flt, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(flt)
            and all(_matches(a, b) for a, b in zip(value, flt))
        )
    return value == flt


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return value == arg
    if op == "$ne":
        return value != arg
    if op in _RANGE:
        try:
            a, b = float(value), float(arg)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(f"unsupported filter operator {op}")


# ---------------------------------------------------------------- the store

class MosaicStore(BaseStore):
    """A LangGraph store whose items are Mosaic memories of the key's
    principal (or of the workspace ``workspace_id``).

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
                "MosaicStore cannot refresh a TTL on read: a memory's expiry is part of its "
                "record and write receipt, fixed when it is written (use "
                "TTLConfig(refresh_on_read=False))"
            )
        self.client = client if client is not None else Mosaic(os.environ.get("MOSAIC_KEY"))
        self.workspace_id = workspace_id
        self.index_config = index
        self.ttl_config = ttl

    # ------------------------------------------------------------ reading

    def _get(self, op: GetOp) -> Optional[Item]:
        ns, key = tuple(op.namespace), str(op.key)
        try:
            memory = self.client.get_item(ns, key, workspace_id=self.workspace_id)
        except NotFoundError:
            return None
        if memory.state not in ("active", "publishing"):
            return None
        if memory.expires_at_unix_ms is not None and memory.expires_at_unix_ms <= int(time.time() * 1000):
            return None
        parsed = _parse(memory.content)
        if parsed is None:
            return None
        at = _ms(memory.created_at_unix_ms)
        return Item(value=parsed[2], key=key, namespace=ns, created_at=at, updated_at=at)

    def _scope(self) -> List[Dict[str, Any]]:
        """The subject's items only: the principal's own facts, or the
        workspace's knowledge."""
        if self.workspace_id is None:
            return [{"user_id": {"gte": ""}}, {"NOT": {"workspace_id": {"gte": ""}}}]
        return [{"workspace_id": self.workspace_id}, {"NOT": {"user_id": {"gte": ""}}}]

    def _search(self, op: SearchOp) -> List[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        where = self._scope()
        where.append({"namespace": {"prefix": "/".join(prefix)}} if prefix else {"key": {"gte": ""}})
        conditions, _ = server_filter(op.filter)
        where.extend(conditions)
        want = op.offset + op.limit
        if want > MAX_SEARCH_DEPTH:
            raise ValueError(f"MosaicStore pages at most {MAX_SEARCH_DEPTH} items deep (offset + limit)")
        if op.limit <= 0:
            return []
        found, left_out = self._page(op, op.query or None, where, want)
        if left_out and len(found) < want:
            # The ranker reads a bounded depth of candidates per index
            # (about 200 items in all): eligible items it did not reach
            # follow the ranked ones, unscored and newest first.
            ranked = {(i.namespace, i.key) for i in found}
            rest, _ = self._page(op, None, where, want + len(found))
            found.extend(i for i in rest if (i.namespace, i.key) not in ranked)
        return found[op.offset : want]

    def _page(
        self, op: SearchOp, query: Optional[str], where: List[Dict[str, Any]], want: int
    ) -> Tuple[List[SearchItem], bool]:
        """The first ``want`` items of one recall that match ``op.filter``,
        and whether a ranked recall left eligible items unranked. The
        server's conditions admit more than the filter only for conditions
        its index cannot decide or partially indexed items; then the recall
        is asked for again, deeper, until it holds ``want`` matching items
        or nothing more is there."""
        ask = want
        while True:
            recalled = self.client.search(
                query,
                kinds=["semantic"],
                max_records=ask,
                workspace_id=self.workspace_id,
                filter={"AND": where},
            )
            memories = {m["record_id"]: m for m in recalled.raw.get("memories", [])}
            found: List[SearchItem] = []
            for hit in recalled.hits:
                m = memories.get(hit.record_id)
                parsed = _parse(m["content"]) if m else None
                if parsed is None or (op.filter and not _matches(parsed[2], op.filter)):
                    continue
                at = _ms(m["created_at_unix_ms"])
                found.append(
                    SearchItem(
                        namespace=parsed[0],
                        key=parsed[1],
                        value=parsed[2],
                        created_at=at,
                        updated_at=at,
                        score=hit.score if query is not None else None,
                    )
                )
            if len(found) >= want:
                return found[:want], False
            if len(recalled.hits) < ask or ask >= MAX_SEARCH_DEPTH:
                left_out = query is not None and recalled.drop_reasons.get("not_relevant", 0) > 0
                return found, left_out
            ask = min(MAX_SEARCH_DEPTH, ask * 2 + (want - len(found)))

    def _list_namespaces(self, op: ListNamespacesOp) -> List[Namespace]:
        prefix: Optional[Tuple[str, ...]] = None
        suffix: Optional[Tuple[str, ...]] = None
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            if condition.match_type == "prefix" and prefix is None:
                prefix = path
            elif condition.match_type == "suffix" and suffix is None:
                suffix = path
            else:
                raise ValueError(
                    f"MosaicStore lists namespaces with at most one prefix and one suffix condition "
                    f"(got another {condition.match_type!r})"
                )
        out: List[Namespace] = []
        offset, remaining = op.offset, op.limit
        while remaining > 0:
            page = self.client.namespaces(
                prefix=prefix or None,
                suffix=suffix or None,
                max_depth=op.max_depth,
                limit=min(remaining, 1000),
                offset=offset,
                workspace_id=self.workspace_id,
            )
            out.extend(page)
            if len(page) < min(remaining, 1000):
                break
            offset += len(page)
            remaining -= len(page)
        return out

    # ------------------------------------------------------------ writing

    def _put(self, op: PutOp) -> None:
        ns, key = tuple(op.namespace), str(op.key)
        if op.value is None:
            try:
                self.client.delete_item(ns, key, workspace_id=self.workspace_id)
            except NotFoundError:
                pass
            return
        value = op.value if isinstance(op.value, dict) else dict(op.value)
        text = _envelope(ns, key, value)
        ttl_ms = None
        if op.ttl is not None:
            ttl_ms = int(op.ttl * 60_000)
            if ttl_ms <= 0:
                raise ValueError(f"ttl must be a positive number of minutes, got {op.ttl}")
        written = self.client.put_item(
            ns, key, text, metadata=index_of(value), ttl_ms=ttl_ms, workspace_id=self.workspace_id
        )
        if not written.accepted:
            raise StoreWriteRefused(
                f"the write gate refused {ns!r}/{key!r}: " + _reasons(written.violations),
                written.violations,
            )

    # ------------------------------------------------------------ batches

    def batch(self, ops: Iterable[Op]) -> List[Result]:
        """Runs the operations: reads see the store as it was when the batch
        began, then the puts are applied in order (the last put of a key
        wins), as ``InMemoryStore`` does."""
        ops = list(ops)
        results: List[Result] = []
        puts: Dict[Tuple[Namespace, str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                ident = (tuple(op.namespace), str(op.key))
                puts.pop(ident, None)
                puts[ident] = op
                results.append(None)
            else:
                raise ValueError(f"unknown operation type: {type(op)}")
        for op in puts.values():
            self._put(op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> List[Result]:
        """:meth:`batch` on a worker thread (the sync client's calls block)."""
        ops = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, ops)


def _reasons(violations: List[Violation]) -> str:
    return ", ".join(v.code for v in violations) or "no reason given"
