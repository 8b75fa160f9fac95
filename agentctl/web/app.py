"""The dashboard's Starlette application: pages, actions, artifact downloads, live updates.

Pages are rendered on the server from the templates shipped in this package; the one
stylesheet and one script are served from the package too (no CDN, works offline). Every
action is the engine operation the CLI calls, with the actor ``ui``; retry and fork go
through the :class:`~agentctl.runtime.Runtime` facade, which creates the new run, and a
child ``agentctl resume`` executes it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agentctl.errors import AgentctlError, NotFoundError, UsageError
from agentctl.ids import SystemClock
from agentctl.runtime import RecoveryRequest
from agentctl.runtime_dashboard import Dashboard, Store
from agentctl.web import reconcile_form, views
from agentctl.web.adoption import Adopter
from agentctl.web.security import Guard

__all__ = ["ACTOR", "DashboardConfig", "create_app"]

ACTOR = "ui"
STATIC = Path(__file__).resolve().parent / "static"


@dataclass
class DashboardConfig:
    store: Store
    token: str
    adopt: bool = True
    #: Host headers accepted (``host:port``); None accepts any (tests of the ASGI app).
    allowed_hosts: list[str] | None = None
    #: How often the live-update stream looks at the store, in seconds.
    poll_seconds: float = 1.0
    log_dir: Path | None = None
    #: Set when the server is stopping: live-update streams end so it need not wait.
    stopping: threading.Event = field(default_factory=threading.Event)


def _status_for(error: AgentctlError) -> int:
    if isinstance(error, NotFoundError):
        return 404
    return {2: 400, 3: 409}.get(error.exit_code, 500)


def create_app(config: DashboardConfig) -> Starlette:
    dashboard = Dashboard(config.store, SystemClock())
    guard = Guard(config.token, config.allowed_hosts)
    adopter = Adopter(dashboard, enabled=config.adopt, log_dir=config.log_dir)
    env = Environment(
        loader=PackageLoader("agentctl.web", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pretty"] = views.pretty
    env.filters["duration"] = views.format_seconds

    def render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        template = env.get_template(name)
        body = template.render(
            csrf=guard.csrf,
            path=request.url.path,
            notice=request.query_params.get("notice", ""),
            adopting=adopter.running(),
            **context,
        )
        return HTMLResponse(body, status_code=status_code)

    def failure(request: Request, error: AgentctlError) -> Response:
        return render(
            request,
            "error.html",
            status_code=_status_for(error),
            title="Refused",
            error={"message": error.message, "hint": error.hint, "code": error.code},
        )

    def page(builder: Callable[[Request], Response]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            try:
                return await run_in_threadpool(builder, request)
            except AgentctlError as error:
                return failure(request, error)

        return endpoint

    # -- pages ---------------------------------------------------------------------------

    def runs(request: Request) -> Response:
        params = request.query_params
        try:
            limit = min(1000, max(1, int(params.get("limit", "100"))))
        except ValueError:
            limit = 100
        data = views.runs_page(
            dashboard,
            state=params.get("state") or None,
            workflow=params.get("workflow") or None,
            search=(params.get("q") or "").strip() or None,
            limit=limit,
            before=params.get("before") or None,
        )
        return render(request, "runs.html", title="Runs", **data)

    def run(request: Request) -> Response:
        data = views.run_page(dashboard, request.path_params["run_id"])
        return render(request, "run.html", title=data.run["runId"], page=data)

    async def graph(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            document = await run_in_threadpool(views.graph_document, dashboard, run_id)
        except AgentctlError as error:
            problem = {"code": error.code, "message": error.message, "hint": error.hint}
            return JSONResponse({"error": problem}, status_code=_status_for(error))
        return JSONResponse(document, headers={"Cache-Control": "no-store"})

    def inbox(request: Request) -> Response:
        return render(
            request,
            "inbox.html",
            title="Inbox",
            items=views.inbox(dashboard),
            pauses=[pause.to_json() for pause in dashboard.paused()],
            effects=views.uncertain_effects(dashboard),
        )

    def effects(request: Request) -> Response:
        return render(
            request, "effects.html", title="Effects", effects=views.uncertain_effects(dashboard)
        )

    def artifact(request: Request) -> Response:
        found = dashboard.artifact_file(
            request.path_params["run_id"], request.path_params["digest"]
        )
        return FileResponse(found.path, filename=found.filename, media_type=found.media_type)

    # -- actions -------------------------------------------------------------------------

    def action(
        operation: Callable[[Request, FormData], tuple[str, str | None]],
    ) -> Callable[[Request], Any]:
        """Check the CSRF token, run the operation, adopt its run, redirect back."""

        async def endpoint(request: Request) -> Response:
            form = await request.form()
            refusal = guard.csrf_refusal(request, form.get("csrf"))
            if refusal is not None:
                return refusal
            try:
                notice, run_id = await run_in_threadpool(operation, request, form)
                if run_id is not None and await run_in_threadpool(adopter.maybe_adopt, run_id):
                    notice += f"; the dashboard resumed run {run_id}"
            except AgentctlError as error:
                return failure(request, error)
            return RedirectResponse(_back(form, notice), status_code=303)

        return endpoint

    def _back(form: FormData, notice: str) -> str:
        """Where a form's ``next`` field sends the browser (a path of this site only)."""
        back = str(form.get("next") or "/")
        if not back.startswith("/") or back.startswith("//"):
            back = "/"
        separator = "&" if "?" in back else "?"
        return f"{back}{separator}notice={quote(notice)}"

    def _text(form: FormData, name: str) -> str:
        value = form.get(name)
        return value.strip() if isinstance(value, str) else ""

    def decide(approve: bool) -> Callable[[Request, FormData], tuple[str, str | None]]:
        def operation(request: Request, form: FormData) -> tuple[str, str | None]:
            reason = _text(form, "reason")
            if not reason:
                raise UsageError("a reason is required (it is kept in the audit log)")
            data = dashboard.decide(
                request.path_params["approval_id"], approve=approve, reason=reason, actor=ACTOR
            )
            decided = data.approval
            already = "already " if data.unchanged else ""
            return f"{decided.id} {already}{decided.status}", decided.run_id

        return operation

    def answer(request: Request, form: FormData) -> tuple[str, str | None]:
        value = form.get("value")
        if not isinstance(value, str) or not value.strip():
            raise UsageError("an answer is required")
        data = dashboard.answer(request.path_params["approval_id"], value.strip(), actor=ACTOR)
        answered = data.approval
        return f"{answered.id} answered", answered.run_id

    async def reconcile(request: Request) -> Response:
        """Conclude an effect in doubt. A form that cannot be accepted — by the checks of
        agentctl/web/reconcile_form.py or by the engine — is drawn again with what was typed
        and what to change, instead of an error page."""
        form = await request.form()
        refusal = guard.csrf_refusal(request, form.get("csrf"))
        if refusal is not None:
            return refusal
        effect_id = request.path_params["effect_id"]
        draft = reconcile_form.Draft(
            status=_text(form, "status"),
            reason=_text(form, "reason"),
            evidence=_text(form, "evidence"),
            result=_text(form, "result"),
            result_schema=_text(form, "result_schema"),
        )
        effects = await run_in_threadpool(views.uncertain_effects, dashboard)
        effect = next((e for e in effects if e["effectId"] == effect_id), None)
        if effect is None:
            return failure(
                request,
                UsageError(
                    f"effect {effect_id} is not waiting for a conclusion",
                    hint="someone concluded it meanwhile, or its run is still executing it; "
                    "the Effects page lists what is in doubt now",
                ),
            )
        conclusion, draft.problems = reconcile_form.to_request(effect, draft, ACTOR)
        if conclusion is not None:
            try:
                data = await run_in_threadpool(dashboard.reconcile, conclusion)
            except AgentctlError as error:
                hint = f" {error.hint[:1].upper()}{error.hint[1:]}." if error.hint else ""
                draft.problems = [f"{error.message[:1].upper()}{error.message[1:]}.{hint}"]
            else:
                concluded = data.reconciliation.status.replace("_", "-")
                notice = f"{effect_id} reconciled as {concluded}"
                run_id = data.effect.run_id
                if await run_in_threadpool(adopter.maybe_adopt, run_id):
                    notice += f"; the dashboard resumed run {run_id}"
                return RedirectResponse(_back(form, notice), status_code=303)
        return render(
            request,
            "reconcile_refused.html",
            status_code=400,
            title="Not reconciled yet",
            effect=effect,
            draft=draft,
            back=str(form.get("next") or "/effects"),
        )

    def cancel(request: Request, form: FormData) -> tuple[str, str | None]:
        run_id = request.path_params["run_id"]
        data = dashboard.cancel(run_id, _text(form, "reason") or None, actor=ACTOR)
        note = data.note
        return f"{run_id} {data.state}" + (f" ({note})" if note else ""), None

    async def resume(request: Request) -> Response:
        """Let a run go on past its pause step: record it (actor ``ui``), then execute it in
        a child ``agentctl resume``, as the Retry button does."""
        form = await request.form()
        refusal = guard.csrf_refusal(request, form.get("csrf"))
        if refusal is not None:
            return refusal
        run_id = request.path_params["run_id"]
        try:
            released = await run_in_threadpool(
                lambda: dashboard.release_pause(
                    run_id, actor=ACTOR, reason=_text(form, "reason") or None
                )
            )
        except AgentctlError as error:
            return failure(request, error)
        notice = f"{run_id} resumed past {', '.join(released.tasks)}"
        if await run_in_threadpool(adopter.start, run_id):
            notice += "; the dashboard executes it"
        return RedirectResponse(_back(form, notice), status_code=303)

    async def adopt(request: Request) -> Response:
        """Resume a run whose owning process is gone (``agentctl resume`` in a child)."""
        form = await request.form()
        refusal = guard.csrf_refusal(request, form.get("csrf"))
        if refusal is not None:
            return refusal
        run_id = request.path_params["run_id"]
        if not await run_in_threadpool(adopter.ready, run_id):
            return failure(
                request,
                UsageError(
                    f"run {run_id} cannot be adopted now",
                    hint="it is owned by a live process, or something it waits for is still "
                    "open: answer what the inbox lists and conclude its effects in doubt first",
                ),
            )
        started = await run_in_threadpool(adopter.start, run_id)
        notice = f"{run_id} adopted; the dashboard executes it" if started else run_id
        return RedirectResponse(_back(form, notice), status_code=303)

    def derive(mode: str) -> Callable[[Request], Any]:
        """Retry or fork a finished run: the facade creates the new run (actor ``ui``),
        a child ``agentctl resume`` executes it, and the browser goes to its page."""

        def create(source: str, form: FormData) -> str:
            runtime = dashboard.runtime()
            reason = _text(form, "reason") or None
            if mode == "fork":
                return runtime.create(RecoveryRequest("fork", source, reason=reason, actor=ACTOR))
            workflow_file, workspace = views.recorded_source(dashboard, source)
            scope = _text(form, "scope") or "failed"
            request = RecoveryRequest(
                "retry",
                source,
                workflow_file,
                failed=scope == "failed",
                from_tasks=[scope.removeprefix("from:")] if scope.startswith("from:") else [],
                workspace=workspace,
                reason=reason,
                actor=ACTOR,
            )
            return runtime.create(request)

        async def endpoint(request: Request) -> Response:
            form = await request.form()
            refusal = guard.csrf_refusal(request, form.get("csrf"))
            if refusal is not None:
                return refusal
            source = request.path_params["run_id"]
            try:
                run_id = await run_in_threadpool(create, source, form)
            except AgentctlError as error:
                return failure(request, error)
            notice = f"{run_id} created ({mode} of {source})"
            if await run_in_threadpool(adopter.start, run_id):
                notice += "; the dashboard executes it"
            return RedirectResponse(f"/runs/{run_id}?notice={quote(notice)}", status_code=303)

        return endpoint

    # -- live updates --------------------------------------------------------------------

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            last = None
            yield "retry: 2000\n\n"
            while not config.stopping.is_set() and not await request.is_disconnected():
                marker = await run_in_threadpool(dashboard.change_marker)
                if marker != last:
                    last = marker
                    yield f"data: {json.dumps(marker)}\n\n"
                else:
                    yield ": idle\n\n"
                await asyncio.sleep(config.poll_seconds)

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await run_in_threadpool(adopter.wait, 0)

    routes = [
        Route("/", page(runs)),
        Route("/runs/{run_id}", page(run)),
        Route("/runs/{run_id}/graph.json", graph),
        Route("/inbox", page(inbox)),
        Route("/effects", page(effects)),
        Route("/runs/{run_id}/artifacts/{digest}", page(artifact)),
        Route("/events", events),
        Route("/approvals/{approval_id}/approve", action(decide(True)), methods=["POST"]),
        Route("/approvals/{approval_id}/reject", action(decide(False)), methods=["POST"]),
        Route("/approvals/{approval_id}/answer", action(answer), methods=["POST"]),
        Route("/effects/{effect_id}/reconcile", reconcile, methods=["POST"]),
        Route("/runs/{run_id}/cancel", action(cancel), methods=["POST"]),
        Route("/runs/{run_id}/resume", resume, methods=["POST"]),
        Route("/runs/{run_id}/adopt", adopt, methods=["POST"]),
        Route("/runs/{run_id}/retry", derive("retry"), methods=["POST"]),
        Route("/runs/{run_id}/fork", derive("fork"), methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard)],
        lifespan=lifespan,
    )
    app.state.adopter = adopter
    return app
