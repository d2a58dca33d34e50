"""Python client for Mosaic Memory, a governed long-term memory service
for LLM agents: :class:`Mosaic` (sync) and :class:`AsyncMosaic` (async),
typed results in :mod:`mosaic_memory.types`, typed errors in
:mod:`mosaic_memory.errors`, and a LangGraph store in
:mod:`mosaic_memory.langgraph` (needs ``langgraph-checkpoint``)."""

from .client import DEFAULT_BASE_URL, USER_HEADER, AsyncMosaic, Mosaic
from .errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ConnectionFailed,
    MosaicError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    RefusedError,
    ServerError,
    UnavailableError,
)
from .types import (
    Consent,
    Deletion,
    DeletionReceipt,
    Erasure,
    Hit,
    History,
    ImportedLine,
    ImportResult,
    IngestedMessage,
    IngestResult,
    ListedMemory,
    Memory,
    RecallResult,
    SkippedMessage,
    Verification,
    Violation,
    WriteResult,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncMosaic",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "ConnectionFailed",
    "Consent",
    "DEFAULT_BASE_URL",
    "Deletion",
    "DeletionReceipt",
    "Erasure",
    "Hit",
    "History",
    "ImportResult",
    "ImportedLine",
    "IngestResult",
    "IngestedMessage",
    "SkippedMessage",
    "ListedMemory",
    "Memory",
    "Mosaic",
    "MosaicError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RecallResult",
    "RefusedError",
    "ServerError",
    "USER_HEADER",
    "UnavailableError",
    "Verification",
    "Violation",
    "WriteResult",
]
