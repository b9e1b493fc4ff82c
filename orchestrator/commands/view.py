"""``headroom view``: browse a results store in a web browser, locally and read-only."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.commands.options import store_option

HOST = "127.0.0.1"  # loopback only: results never leave this machine through the viewer


@click.command()
@store_option()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="port on 127.0.0.1 (0: pick a free one)",
)
def view(store_path: Path, port: int) -> None:
    """Serve a local web page to browse runs, reports, the task x configuration heatmap and every try's evidence.

    Binds 127.0.0.1 only and opens the store read-only; every asset is served locally.
    """
    import socket

    import uvicorn

    from orchestrator.errors import UserError
    from orchestrator.view.app import create_app

    app = create_app(store_path)
    # Bind and listen here so a busy port is a one-line error and port 0 can print the port it got.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
        sock.listen(128)  # connections made from now on wait for the server instead of being refused
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {HOST}:{port} ({exc.strerror})", field="--port") from None
    bound = sock.getsockname()[1]
    click.echo(f"headroom view: http://{HOST}:{bound}/  (store {store_path}, read-only; Ctrl-C stops)", err=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[sock])
