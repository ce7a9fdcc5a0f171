"""`headwater run | validate | status`: the command line.

Configuration problems are printed (property, problem, fix) with exit status 2, before anything
connects; problems with the source database exit with status 1. No traceback is shown unless
`--debug` is given, and no password is ever printed.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from pathlib import Path

import click
from rich.console import Console

from headwater import __version__
from headwater.config import ConfigErrors
from headwater.pipeline_config import load_config

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


def _load(path: str):
    try:
        return load_config(path)
    except ConfigErrors as exc:
        err.print(f"[bold red]{path}: the configuration is not valid[/bold red]")
        for e in exc.errors:
            err.print(f"  [bold]{e.property}[/bold]: {e.message}" + (f"\n      fix: {e.hint}" if e.hint else ""),
                      markup=True)
        sys.exit(2)


def _fail(exc: BaseException, debug: bool) -> None:
    from headwater.connectors.errors import SourceError

    if debug:
        raise exc
    if isinstance(exc, SourceError):
        err.print(f"[bold red]error:[/bold red] {exc}")
    else:
        err.print(f"[bold red]error:[/bold red] {type(exc).__name__}: {_first_line(exc)}")
        err.print("run with --debug for the full traceback")
    sys.exit(1)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # Spark wraps Python errors from the source in long JVM messages: keep the meaningful line
    for line in text.splitlines():
        if "SourceError:" in line or "ConfigErrors:" in line:
            return line.split("Error:", 1)[1].strip()
    return text.splitlines()[0] if text else ""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="headwater")
@click.option("--debug", is_flag=True, help="Show full tracebacks and debug logs.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """headwater: change data capture with Debezium's events, on Apache Spark."""
    ctx.obj = {"debug": debug}
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@cli.command()
@click.argument("config", type=click.Path())
def validate(config: str) -> None:
    """Check a configuration file without connecting to anything."""
    cfg = _load(config)
    out.print(f"[green]{config}: the configuration is valid[/green]")
    out.print(f"  pipeline {cfg.name}: {cfg.source.connector} source -> {cfg.sink.type} sink")
    for k, v in sorted(cfg.source.masked().items()):
        out.print(f"    {k} = {v}", markup=False)


@cli.command()
@click.argument("config", type=click.Path())
@click.option("--once", is_flag=True, help="Process what the source holds now (snapshot and changes), then exit.")
@click.pass_context
def run(ctx: click.Context, config: str, once: bool) -> None:
    """Run the pipeline until stopped (SIGINT/SIGTERM stop it after the batch in flight)."""
    cfg = _load(config)
    from headwater.cli.progress import Progress

    stop = threading.Event()

    def on_signal(signum, frame) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        from headwater.spark.pipeline import spark_session, start_query

        spark = spark_session(cfg)
        query = start_query(spark, cfg, once=once, console=out)
        progress = Progress(cfg, query, interactive=sys.stdout.isatty() and cfg.sink.type != "console")
        with progress:
            while query.isActive:
                if stop.is_set():
                    progress.note("stopping after the batch in flight")
                    deadline = time.monotonic() + 120
                    while query.status.get("isTriggerActive") and time.monotonic() < deadline:
                        time.sleep(0.1)
                    query.stop()
                    break
                query.awaitTermination(0.5)
                progress.update()
        exc = query.exception()
        if exc is not None:
            raise RuntimeError(str(exc))
        progress.finish()
        spark.stop()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except BaseException as exc:
        _fail(exc, ctx.obj["debug"])


@cli.command()
@click.argument("config", type=click.Path())
@click.pass_context
def status(ctx: click.Context, config: str) -> None:
    """Show the stored positions and how far the source is ahead of them."""
    cfg = _load(config)
    from headwater.connectors.registry import create_source
    from headwater.spark.pipeline import checkpoint_offsets

    info = checkpoint_offsets(Path(cfg.spark.checkpoint).expanduser())
    out.print(f"[bold]{cfg.name}[/bold] ({cfg.source.connector}, topic.prefix {cfg.source['topic.prefix']})")
    out.print(f"  checkpoint: {info['checkpoint']}")
    if "committed_batch" not in info:
        out.print("  no batch committed yet")
    else:
        out.print(f"  last committed batch: {info['committed_batch']}")
        out.print(f"  committed position: {info['committed_offset']}", markup=False)
    if "planned_offset" in info:
        out.print(f"  planned, not yet committed: batch {info['planned_batch']} {info['planned_offset']}",
                  markup=False)
    try:
        source = create_source(cfg.source)
        try:
            st = source.status(info.get("committed_offset"))
        finally:
            source.close()
    except BaseException as exc:
        _fail(exc, ctx.obj["debug"])
        return
    for k, v in st.items():
        out.print(f"  {k}: {v}", markup=False)


def main() -> None:
    cli(prog_name="headwater")


if __name__ == "__main__":
    main()
