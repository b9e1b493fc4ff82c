"""The viewer's web application: server-rendered pages over a read-only store.

Pages: the run list, a run (the report, an interactive rates plot, the task x
configuration heatmap), one heatmap cell (its trials), one trial (every try
with its evidence), and a comparison of two runs. Every asset is served from
the installed package (plotly.js from the plotly package); nothing is fetched
from elsewhere.
"""

from __future__ import annotations

import html
import json
import sqlite3
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from markdown_it import MarkdownIt
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from orchestrator.artifacts import reader
from orchestrator.errors import UserError
from orchestrator.report import comparison, document, markdown
from orchestrator.report import html as html_report
from orchestrator.report.model import ReportDocument
from orchestrator.report.text import mib
from orchestrator.store.sqlite import Store, read_only_reason
from orchestrator.view import artifacts, data, figures

HERE = files("orchestrator.view")
PLOTLY_JS = files("plotly") / "package_data" / "plotly.min.js"
# Loopback names only: a page on another site cannot reach this server through DNS rebinding.
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]


def count(value: float | int | None) -> str:
    """A count stored as a number (token counts come back from SQLite as floats): 11704, not 11704.0."""
    if value is None:
        return "—"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def size(value: int | None) -> str:
    """Bytes as a reader counts them: 812 B, 3.4 KiB, 64.0 MiB."""
    if value is None:
        return "—"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value} B"


def _md() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def run_body(doc: ReportDocument, run_id: str) -> str:
    """The report rendered (same Markdown as ``headroom report``) in the HTML report's layout: the summary, the
    heatmap with every cell linked to its trials (it replaces the per-task table), then the rest folded, the
    interactive rates plot first."""
    body = _md().render(markdown.render(doc))
    if not doc.configurations:
        return html_report.layout(body)

    def href(task: str, label: str) -> str:
        return f"/runs/{run_id}/cell?" + urlencode({"task": task, "config": label})

    plot = (
        '<div id="rates-plot" class="plot"></div>'
        '<script type="application/json" id="rates-plot-spec">'
        # Raw text inside <script>: only "</" could end it early; JSON.parse reads "<\/" back as "</".
        + json.dumps(figures.rates_by_configuration(doc.configurations)).replace("</", "<\\/")
        + "</script>"
    )
    return html_report.layout(body, html_report.heatmap_section(doc, href), [("Plots", plot)], drop=("Per task",))


def create_app(store_path: Path) -> Starlette:
    store_path = Path(store_path)
    Store.open_existing(store_path).close()  # fail now, with a one-line error, if it is not a store
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters["mib"] = mib
    templates.env.filters["count"] = count
    templates.env.filters["bytes"] = size
    docs = data.DocumentCache()

    def open_store() -> Store:
        # One read-only connection per request: requests run on worker threads and
        # sqlite3 connections stay on the thread that made them.
        return Store.open_existing(store_path)

    def run_or_404(store: Store, run_id: str) -> Any:
        try:
            return store.run(run_id)
        except UserError:
            raise HTTPException(404, f"no run {run_id!r} in {store_path}") from None

    def page(request: Request, name: str, **ctx: Any) -> Response:
        return templates.TemplateResponse(request, name, {"store_path": str(store_path), **ctx})

    def runs(request: Request) -> Response:
        with open_store() as store:
            return page(request, "runs.html", runs=data.runs_overview(store))

    def run(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        with open_store() as store:
            info = run_or_404(store, run_id)
            try:
                doc = docs.get(store, run_id, rules=request.query_params.get("rules") or None)
            except UserError as exc:  # ?rules= naming a rule that does not exist
                raise HTTPException(400, exc.one_line()) from None
            return page(
                request,
                "run.html",
                run=doc.run,
                info=info,
                body=run_body(doc, run_id),
                isolation=data.isolation_of(doc.provenance),
            )

    def cell(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        task, label = request.query_params.get("task", ""), request.query_params.get("config", "")
        with open_store() as store:
            run_or_404(store, run_id)
            trials = data.cell_trials(store, run_id, task, label)
            if not trials:
                raise HTTPException(404, f"run {run_id} has no trials of task {task!r} under {label!r}")
            return page(request, "cell.html", run_id=run_id, task=task, label=label, trials=trials)

    def trial(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        trial_id = request.query_params.get("id", "")
        with open_store() as store:
            info = run_or_404(store, run_id)
            detail = data.trial_detail(store, run_id, trial_id)
            if detail is None:
                raise HTTPException(404, f"run {run_id} has no trial {trial_id!r}")
            prov = store.provenance(run_id)
            task = prov.tasks.get(detail["plan"]["task_id"])
            task_prov = task.model_dump(mode="json") if task is not None else None
            return page(
                request,
                "trial.html",
                run_id=run_id,
                info=info,
                trial=detail,
                task_provenance=task_prov,
                provenance_json=json.dumps(prov.to_stored(), indent=2, sort_keys=True),
                task_provenance_json=json.dumps(task_prov, indent=2, sort_keys=True),
                artifacts=artifacts.try_artifacts(store.db, run_id, trial_id),
                model_calls=artifacts.model_calls(store.db, run_id, trial_id),
            )

    def artifact_args(request: Request) -> tuple[str, str, int, str]:
        q = request.query_params
        try:
            try_index = int(q.get("try", ""))
        except ValueError:
            raise HTTPException(400, "try must be a number") from None
        return request.path_params["run_id"], q.get("trial", ""), try_index, q.get("name", "")

    def artifact(request: Request) -> Response:
        run_id, trial_id, try_index, name = artifact_args(request)
        with open_store() as store:
            run_or_404(store, run_id)
            view = artifacts.artifact_view(store.db, run_id, trial_id, try_index, name)
            if view is None:
                raise HTTPException(404, f"try {try_index} of trial {trial_id!r} has no artifact {name!r}")
            raw = f"/runs/{run_id}/artifact/raw?" + urlencode({"trial": trial_id, "try": try_index, "name": name})
            return page(
                request, "artifact.html", run_id=run_id, trial_id=trial_id, try_index=try_index, view=view, raw_href=raw
            )

    def artifact_raw(request: Request) -> Response:
        """The content as stored, streamed, always as a download: it is the agent's, never a page of ours."""
        run_id, trial_id, try_index, name = artifact_args(request)
        with open_store() as store:
            info = reader.find(store.db, run_id, trial_id, try_index, name)
        if info is None or info.sha256 is None:
            raise HTTPException(404, f"try {try_index} of trial {trial_id!r} has no stored artifact {name!r}")
        sha = info.sha256

        def body():
            # Its own connection: the response is streamed from worker threads, one chunk at a time.
            uri = f"{store_path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if read_only_reason(store_path) else "")
            db = sqlite3.connect(uri, uri=True, check_same_thread=False)
            try:
                yield from reader.stream(db, sha)
            finally:
                db.close()

        filename = name.rsplit("/", 1)[-1] or "artifact"
        return StreamingResponse(
            body(),
            media_type="application/octet-stream",
            headers={
                "Content-Disposition": f"attachment; filename*=UTF-8''{quote(filename, safe='')}",
                "Content-Length": str(info.size),
                "X-Content-Type-Options": "nosniff",
            },
        )

    def compare(request: Request) -> Response:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        with open_store() as store:
            runs_list = data.runs_overview(store)
            body = None
            if a and b:
                run_or_404(store, a)
                run_or_404(store, b)
                try:
                    body = _md().render(
                        comparison.markdown(
                            document.comparison_document(
                                store, a, store, b, rules=request.query_params.get("rules") or None
                            )
                        )
                    )
                except UserError as exc:
                    body = f'<p class="error">{html.escape(exc.one_line())}</p>'
            return page(request, "compare.html", runs=runs_list, a=a, b=b, body=body)

    def plotly_js(request: Request) -> Response:
        return FileResponse(str(PLOTLY_JS), media_type="text/javascript")

    async def not_found(request: Request, exc: HTTPException) -> Response:
        return HTMLResponse(
            f"<!doctype html><title>not found</title><p>{html.escape(str(exc.detail))}</p>"
            '<p><a href="/">all runs</a></p>',
            status_code=exc.status_code,
        )

    routes = [
        Route("/", runs),
        Route("/runs/{run_id}", run),
        Route("/runs/{run_id}/cell", cell),
        Route("/runs/{run_id}/trial", trial),
        Route("/runs/{run_id}/artifact", artifact),
        Route("/runs/{run_id}/artifact/raw", artifact_raw),
        Route("/compare", compare),
        Route("/assets/plotly.min.js", plotly_js),
        Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=ALLOWED_HOSTS)],
        exception_handlers={HTTPException: not_found},  # type: ignore[dict-item]  # starlette: handlers take Exception
    )
