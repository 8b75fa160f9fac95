"""Who may talk to the dashboard: the access token, the CSRF token and the Host check.

- Every request must carry the random access token: ``?token=`` in the URL printed at
  start-up (then kept in an HttpOnly ``SameSite=Strict`` cookie), the cookie, or an
  ``Authorization: Bearer`` header. None is 401; a wrong one is 403.
- A mutating request (POST) must also carry the CSRF token, derived from the access token,
  as the ``csrf`` form field or the ``X-CSRF-Token`` header; and when the browser sends an
  ``Origin``, it must be this server's. A page on another site can make a browser send the
  cookie, but it can neither read the CSRF token nor forge the Origin.
- The ``Host`` header must name this server, so a DNS-rebinding page cannot reach it under
  another name (also with ``--allow-remote``: the addresses it serves, docs/dashboard.md).
- Every response says what a browser may do with it: a ``Content-Security-Policy`` that
  allows scripts, styles, images and connections from this server only (inline styles are
  allowed, inline scripts are not), no framing, and ``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

__all__ = ["COOKIE", "CONTENT_SECURITY_POLICY", "Guard", "csrf_token", "new_token"]

COOKIE = "agentctl_ui"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)


def new_token() -> str:
    return secrets.token_urlsafe(24)


def csrf_token(token: str) -> str:
    return hmac.new(token.encode(), b"agentctl-ui-csrf", hashlib.sha256).hexdigest()


class Guard:
    """The checks every request passes before it reaches a page or an action."""

    def __init__(self, token: str, allowed_hosts: Iterable[str] | None) -> None:
        self.token = token
        self.csrf = csrf_token(token)
        self.allowed_hosts = None if allowed_hosts is None else frozenset(allowed_hosts)

    def _presented(self, request: Request) -> tuple[str | None, bool]:
        """``(token, came in the URL)``."""
        if "token" in request.query_params:
            return request.query_params["token"], True
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip(), False
        return request.cookies.get(COOKIE), False

    def _matches(self, presented: str, expected: str) -> bool:
        return hmac.compare_digest(presented.encode(), expected.encode())

    async def __call__(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await self._guarded(request, call_next)
        # On every answer, refusals included: nothing served here may run foreign scripts,
        # be framed by another site, or be read by a browser as another type than it says.
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    async def _guarded(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        host = request.headers.get("host", "")
        if self.allowed_hosts is not None and host not in self.allowed_hosts:
            return PlainTextResponse(
                f"host {host!r} is not this dashboard's address", status_code=403
            )
        presented, in_url = self._presented(request)
        if presented is None:
            return PlainTextResponse(
                "this dashboard needs its access token: open the URL `agentctl ui` printed "
                "(it ends in ?token=…)",
                status_code=401,
            )
        if not self._matches(presented, self.token):
            return PlainTextResponse("wrong access token", status_code=403)
        if request.method not in ("GET", "HEAD"):
            refusal = await self._check_post(request)
            if refusal is not None:
                return refusal
        if in_url and request.method == "GET":
            # Keep the token out of the address bar, history and Referer from here on.
            query = urlencode(
                [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            )
            target = request.url.path + (f"?{query}" if query else "")
            response: Response = RedirectResponse(target, status_code=303)
        else:
            response = await call_next(request)
        if in_url or request.cookies.get(COOKIE) != self.token:
            response.set_cookie(
                COOKIE, self.token, httponly=True, samesite="strict", path="/", secure=False
            )
        return response

    async def _check_post(self, request: Request) -> Response | None:
        if request.method != "POST":
            return PlainTextResponse("only GET and POST are served", status_code=405)
        origin = request.headers.get("origin")
        if origin is not None and origin != "null":
            if urlsplit(origin).netloc != request.headers.get("host", ""):
                return PlainTextResponse(f"cross-origin request from {origin}", status_code=403)
        return None

    def csrf_refusal(self, request: Request, field: object) -> Response | None:
        """None when the request carries the CSRF token (form field or header)."""
        offered = request.headers.get("x-csrf-token")
        if offered is None and isinstance(field, str):
            offered = field
        if offered is None or not self._matches(offered, self.csrf):
            return PlainTextResponse(
                "missing or wrong CSRF token: reload the page and submit its form again",
                status_code=403,
            )
        return None
