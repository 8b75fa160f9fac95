"""``agentctl ui``: serve the dashboard over the store until Ctrl-C."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from agentctl.cli import output
from agentctl.cli.options import DbOption, db_from_context
from agentctl.errors import UsageError

if TYPE_CHECKING:
    import socket
    from types import FrameType

__all__ = ["ui_command"]


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _allowed_hosts(host: str, port: int, extra: list[str]) -> list[str]:
    """The Host headers the dashboard answers: the address it serves, loopback names, the
    machine's own names when it listens on every address, and each --allowed-host. A
    remote dashboard checks Host too: a DNS-rebinding page reaches it under another name."""
    import ipaddress
    import socket

    names = {host, "127.0.0.1", "localhost", "::1"}
    try:
        wildcard = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        wildcard = False
    if wildcard:
        names |= {socket.gethostname(), socket.getfqdn()}
        try:
            names |= {str(a[4][0]) for a in socket.getaddrinfo(socket.gethostname(), None)}
        except OSError:
            pass
    allowed: set[str] = set()
    for name in names:
        shown = f"[{name}]" if ":" in name else name
        allowed.add(f"{shown}:{port}")
        if port == 80:
            allowed.add(shown)
    for name in extra:
        allowed.add(name if _has_port(name) else f"{name}:{port}")
    return sorted(allowed)


def _has_port(name: str) -> bool:
    if name.startswith("["):
        return "]:" in name
    return name.count(":") == 1


def _bind(host: str, port: int) -> socket.socket:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror}",
            code="ui.bind_failed",
            hint="pick another --port (0 lets the system choose a free one)",
        ) from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def ui_command(
    ctx: typer.Context,
    db: DbOption = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option("--port", help="Port to listen on; 0 picks a free one.", min=0, max=65535),
    ] = 8765,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Needed for a --host other than loopback: anyone who can reach the address "
            "and learns the token can approve effects and cancel runs, and the traffic is "
            "plain HTTP (put it behind TLS).",
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            metavar="NAME",
            help="Another name (host or host:port) clients may reach the dashboard under, "
            "e.g. behind a proxy; repeatable. Requests naming any other Host are refused.",
        ),
    ] = None,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the dashboard in the default browser.")
    ] = False,
    no_adopt: Annotated[
        bool,
        typer.Option(
            "--no-adopt",
            help="Only record answers; do not resume a parked run once nothing blocks it.",
        ),
    ] = False,
) -> None:
    """Serve the dashboard: runs, the task graph, the inbox of approvals and questions,
    effects in doubt; approve, answer, reconcile, cancel, retry and fork from the browser.

    Every request needs the random token printed in the URL. When the last answer a parked
    run waited for is given, the dashboard resumes the run (`agentctl resume` in a child
    process) unless --no-adopt is given. A retry or fork started from a finished run's page
    is executed the same way. Ctrl-C stops the server.

    Example: agentctl ui --db .agentctl/runtime.db --port 8765

    Example: agentctl ui --host 0.0.0.0 --allow-remote --allowed-host ops.example.com
    """
    import threading

    import uvicorn

    from agentctl.runtime_dashboard import dashboard_log_dir, open_served_store
    from agentctl.web import DashboardConfig, create_app
    from agentctl.web.security import new_token

    if not _is_loopback(host) and not allow_remote:
        raise UsageError(
            f"--host {host} is not a loopback address",
            code="ui.remote_refused",
            hint="pass --allow-remote as well if other machines must reach the dashboard "
            "(see `agentctl ui --help` for why it is off by default)",
        )
    path = db_from_context(ctx, db)
    # Refused before a port is bound, with the error every reading command gives (exit 5):
    # the dashboard of a mistyped --db would be an empty database created on the spot.
    open_served_store(path).close()
    token = new_token()
    stopping = threading.Event()
    sock = _bind(host, port)
    bound = int(sock.getsockname()[1])
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/?token={token}"
    allowed = _allowed_hosts(host, bound, allowed_host or [])
    with open_served_store(path) as store:
        app = create_app(
            DashboardConfig(
                store=store,
                token=token,
                adopt=not no_adopt,
                allowed_hosts=allowed,
                log_dir=dashboard_log_dir(path),
                stopping=stopping,
            )
        )
        output.current().success(
            "Dashboard",
            {"url": url, "host": host, "port": bound, "db": store.path},
            human=f"agentctl ui on {url}   (Ctrl-C stops it)",
        )
        if open_browser:
            import webbrowser

            webbrowser.open(url)

        class Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: FrameType | None) -> None:
                # The server waits for every open response before it stops; open pages
                # hold a live-update stream, which ends once this is set.
                stopping.set()
                super().handle_exit(sig, frame)

        server = Server(
            uvicorn.Config(
                app,
                log_level="warning",
                lifespan="on",
                access_log=False,
                # A backstop: live-update streams end on their own when stopping is set.
                timeout_graceful_shutdown=5,
            )
        )
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
