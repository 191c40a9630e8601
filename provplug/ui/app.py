"""The explorer's web application (Starlette): the pages (one HTML shell
that reads its view from the URL), their scripts and styles (package data,
nothing from the network), and the JSON API under ``/api``.

Every endpoint is a plain function, so Starlette runs it in its worker
threads: a slow lineage query occupies one thread and never the event loop.
Nothing here writes to the store."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from provplug.api import ProvenanceStore
from provplug.errors import BadParameter as BadParameter
from provplug.errors import ProvplugError
from provplug.ui import documents
from provplug.ui.documents import Caches, LineageQuestion

STATIC = Path(__file__).resolve().parent / "static"
PAGES = ("/", "/runs", "/tables", "/table", "/lineage", "/whatif", "/diff", "/graph")
# The pages run only the scripts and styles served from here: a stored value
# that slipped into the page as markup could still not run.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class Params:
    """A request's query parameters, read with the checks the CLI's options have."""

    def __init__(self, request: Request) -> None:
        self.query = request.query_params

    def text(self, name: str) -> str | None:
        value = self.query.get(name)
        return value if value not in (None, "") else None

    def texts(self, name: str) -> list[str]:
        return self.query.getlist(name)

    def number(self, name: str, default: int | None = None, minimum: int = 0) -> int | None:
        text = self.text(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise BadParameter(f"{name} must be a whole number, not {text!r}") from None
        if value < minimum:
            raise BadParameter(f"{name} must be at least {minimum}, not {value}")
        return value

    def numbers(self, name: str) -> list[int]:
        out = []
        for text in self.texts(name):
            try:
                out.append(int(text))
            except ValueError:
                raise BadParameter(f"{name} must be a whole number, not {text!r}") from None
        return out

    def flag(self, name: str) -> bool:
        return self.text(name) in ("1", "true", "yes", "on")

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        value = self.text(name) or default
        if value not in choices:
            raise BadParameter(f"{name} must be one of {', '.join(choices)}, not {value!r}")
        return value

    def question(self) -> LineageQuestion:
        return LineageQuestion(
            table=self.text("table"),
            column=self.text("column"),
            where=self.text("where"),
            value_ids=tuple(self.numbers("value_id")),
            direction=self.choice("direction", ("up", "down"), "up"),
            run=self.text("run"),
            method=self.text("method") or "auto",
        )


Endpoint = Callable[[Params], Any]


def json_endpoint(build: Endpoint) -> Callable[[Request], Response]:
    """A route answering with the document ``build`` returns, or with the
    CLI's ``--json`` error object (status 400) when the question is bad."""

    def endpoint(request: Request) -> Response:
        try:
            return JSONResponse(build(Params(request)))
        except ProvplugError as exc:
            return JSONResponse({"error": str(exc), "type": type(exc).__name__}, status_code=400)

    return endpoint


View = tuple[int | None, bool, bool]  # depth, sources_only, summary


def lineage_view(store: ProvenanceStore, caches: Caches, question: LineageQuestion, view: View) -> Any:
    """The document of ``/api/lineage`` for ``question`` seen through ``view``, kept in ``caches``."""

    def document() -> Any:
        return documents.lineage_document(documents.lineage_answer(store, question, caches), *view)

    return caches.documents.get((question, view), document)


def prefetch_summary(store: ProvenanceStore, caches: Caches, p: Params) -> threading.Thread | None:
    """Start, in a thread of its own, the summary the lineage page at this
    URL asks for first (``/api/lineage`` with ``summary``): the query runs
    while the browser loads the page and its script, and the page's request
    waits for it (the caches compute a key once) instead of starting it.
    None when the URL holds no valid question (the page's request says why)."""
    try:
        question, view = p.question(), (p.number("depth"), p.flag("sources_only"), True)
        question.arguments()
    except ProvplugError:
        return None

    def run() -> None:
        # A bad question (an unknown table, say) is not kept: the page's own
        # request computes it again and shows that error.
        with contextlib.suppress(ProvplugError):
            lineage_view(store, caches, question, view)

    thread = threading.Thread(target=run, name="provplug-ui-prefetch", daemon=True)
    thread.start()
    return thread


def api_routes(store: ProvenanceStore, caches: Caches) -> list[Route]:
    def lineage(p: Params) -> Any:
        return lineage_view(store, caches, p.question(), (p.number("depth"), p.flag("sources_only"), p.flag("summary")))

    def lineage_slice(p: Params) -> Any:
        answer = documents.lineage_answer(store, p.question(), caches)
        of_table = p.text("of_table")
        if of_table is None:
            raise BadParameter("of_table is required: the table whose cells to list")
        return documents.lineage_slice(
            answer, of_table, p.text("of_column"), p.number("offset", 0) or 0, p.number("limit", 200, minimum=1) or 200
        )

    def whatif(p: Params) -> Any:
        tables, wheres = p.texts("delete"), p.texts("where")
        if len(wheres) > len(tables):
            raise BadParameter("each where belongs to a delete before it: more where than delete")
        deletions = [(t, (wheres[i] or None) if i < len(wheres) else None) for i, t in enumerate(tables)]
        return documents.whatif_document(store, deletions, p.numbers("value_id"), p.text("run"))

    def diff(p: Params) -> Any:
        run_a, run_b = p.text("a"), p.text("b")
        if run_a is None or run_b is None:
            raise BadParameter("a diff needs two runs: a and b")
        key_text = p.text("key")
        key = tuple(k.strip() for k in key_text.split(",") if k.strip()) if key_text else None
        target = {"table": p.text("table"), "column": p.text("column"), "where": p.text("where")}
        return documents.diff_document(store, run_a, run_b, target, key)

    routes: dict[str, Endpoint] = {
        "/api/runs": lambda p: store.runs(),
        "/api/tables": lambda p: store.tables(p.text("run")),
        "/api/show": lambda p: store.show(_required(p, "table"), p.text("run"), p.number("limit", 10) or 0),
        "/api/stats": lambda p: store.stats(),
        "/api/rows": lambda p: documents.rows_document(
            store,
            _required(p, "table"),
            p.text("run"),
            p.text("where"),
            p.number("offset", 0) or 0,
            p.number("limit", 50, 1) or 50,
        ),
        "/api/lineage": lineage,
        "/api/lineage/slice": lineage_slice,
        "/api/whatif": whatif,
        "/api/diff": diff,
        "/api/graph": lambda p: documents.workflow_document(store, p.text("run")),
    }
    return [Route(path, json_endpoint(build)) for path, build in routes.items()]


def _required(p: Params, name: str) -> str:
    value = p.text(name)
    if value is None:
        raise BadParameter(f"{name} is required")
    return value


def _page(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", media_type="text/html")


def _lineage_page(store: ProvenanceStore, caches: Caches) -> Callable[[Request], Response]:
    def page(request: Request) -> Response:
        prefetch_summary(store, caches, Params(request))
        return _page(request)

    return page


def _unknown_api(request: Request) -> Response:
    return JSONResponse({"error": f"no such API: {request.url.path}", "type": "NotFound"}, status_code=404)


async def _security_headers(request: Any, call_next: Any) -> Response:
    response: Response = await call_next(request)
    response.headers.update(SECURITY_HEADERS)
    return response


def create_app(store: ProvenanceStore, allowed_hosts: list[str] | None = None) -> Starlette:
    """The explorer over ``store``. ``allowed_hosts``: the Host headers
    accepted (a page of another site that resolves its name to this machine
    gets nothing); default: the loopback names."""
    hosts = allowed_hosts or ["127.0.0.1", "localhost", "::1", "[::1]"]
    caches = Caches()
    routes = [
        Route("/lineage", _lineage_page(store, caches)),
        *(Route(path, _page) for path in PAGES if path != "/lineage"),
        *api_routes(store, caches),
        Route("/api/{rest:path}", _unknown_api),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=hosts),
        Middleware(BaseHTTPMiddleware, dispatch=_security_headers),
    ]
    return Starlette(routes=routes, middleware=middleware)
