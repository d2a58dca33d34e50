"""Typed errors. Every error the server sends is ``{"error": {"code",
"message"}}`` with a stable ``code``; the client raises the subclass of
:class:`MosaicError` that matches the HTTP status, carrying that code."""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class MosaicError(Exception):
    """Base of every error this package raises.

    ``code`` is the server's stable machine-readable code (for example
    ``invalid_key``, ``unknown_field``, ``subject_not_permitted``), or a
    client-side one (``connection``, ``invalid_response``). ``status`` is
    the HTTP status, ``None`` when no response arrived.
    """

    def __init__(self, code: str, message: str, status: Optional[int] = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class BadRequestError(MosaicError):
    """400: the request is malformed (``malformed_json``, ``unknown_field``, ...)."""


class AuthenticationError(MosaicError):
    """401: no key (``missing_key``) or an unknown one (``invalid_key``)."""


class PermissionDeniedError(MosaicError):
    """403: the key may not do this (``tenant_mismatch``, ``unverified_evidence``, ...)."""


class NotFoundError(MosaicError):
    """404: no such object, or not visible to this key (``not_found``)."""


class ConflictError(MosaicError):
    """409: the request conflicts with stored state (``stale_generation``,
    ``message_id_in_use``, ``proposal_id_reused``, ...)."""


class PayloadTooLargeError(MosaicError):
    """413: the body exceeds the server's limit (``body_too_large``)."""


class RateLimitedError(MosaicError):
    """429: the key exceeded its request rate (``rate_limited``); retry later."""


class UnavailableError(MosaicError):
    """503: a backend is unavailable (``unavailable``), every pooled
    PostgreSQL read connection stayed in use (``busy``; nothing was changed:
    retry after the ``Retry-After`` seconds), or the request timed out
    (``request_timeout``; a write may still complete: replay it)."""


class ServerError(MosaicError):
    """5xx: an internal failure (``internal``)."""


class ConnectionFailed(MosaicError):
    """No HTTP response: the server could not be reached (code ``connection``)."""


class RefusedError(MosaicError):
    """The write gate refused a write the caller required to succeed
    (code ``refused``); ``violations`` lists the gate's reasons."""

    def __init__(self, message: str, violations: Any) -> None:
        super().__init__("refused", message, None)
        self.violations = violations


_BY_STATUS: Dict[int, Type[MosaicError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    429: RateLimitedError,
    503: UnavailableError,
}


def error_from_response(status: int, body: Any) -> MosaicError:
    """The typed error of an error response (its decoded JSON body, or
    ``None`` when it was not JSON)."""
    code, message = "http_error", f"HTTP {status}"
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = str(body["error"].get("code", code))
        message = str(body["error"].get("message", message))
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else MosaicError
    return cls(code, message, status)
