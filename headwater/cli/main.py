"""`headwater run | validate | status | signal`: the command line.

Configuration problems are printed (property, problem, fix) with exit status 2, before anything
connects; problems with the source database exit with status 1. No traceback is shown unless
`--debug` is given, and no password is ever printed.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
import warnings
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from headwater import __version__
from headwater.cli.failures import DropPy4J, source_error, summary
from headwater.config import ConfigErrors

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


def _load(path: str):
    from headwater.pipeline_config import load_config  # the connectors, the transformation chain: ~0.3 s

    try:
        return load_config(path)
    except ConfigErrors as exc:
        err.print(f"[bold red]{path}: the configuration is not valid[/bold red]")
        for e in exc.errors:
            err.print(f"  [bold]{e.property}[/bold]: {e.message}" + (f"\n      fix: {e.hint}" if e.hint else ""),
                      markup=True)
        sys.exit(2)


def _document(path: str):
    """The file's YAML document, or None when it cannot be read (`_load` then says why)."""
    import yaml

    try:
        return yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return None


def _fail(exc: BaseException, debug: bool) -> None:
    if debug:
        raise exc
    found = source_error(exc)
    err.print(Text.assemble(("error:", "bold red"), " ", str(found) if found is not None else summary(exc)))
    if found is None:
        err.print("run with --debug for the full traceback")
    sys.exit(1)


def _batch_in_flight(query) -> bool:
    """A batch is planned or running; not while the source is still asked where the next one ends
    (it may be waiting for a database it cannot reach)."""
    status = query.status
    return bool(status.get("isTriggerActive")) and not str(status.get("message", "")).startswith("Getting offsets")


class Stopped(BaseException):
    """SIGINT or SIGTERM asked headwater to stop at once (arrived while starting, or a second time)."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="headwater")
@click.option("--debug", is_flag=True, help="Show full tracebacks and debug logs.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """headwater: change data capture with Debezium's events, on Apache Spark."""
    ctx.obj = {"debug": debug}
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not debug:
        for handler in logging.getLogger().handlers:
            handler.addFilter(DropPy4J())


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
    debug = ctx.obj["debug"]

    stop = threading.Event()
    running = threading.Event()  # start-up is over: a second signal stops at once
    first_signal = [0.0]

    def on_signal(signum, frame) -> None:
        # While starting, a signal is noted and acted on once the JVM is up: interrupted while it
        # starts, PySpark would leave it running, orphaned. Once running, the first signal stops
        # after the batch in flight, a second one at once.
        now = time.monotonic()
        if not stop.is_set():
            stop.set()
            first_signal[0] = now
        elif running.is_set() and now - first_signal[0] >= 1.0:  # not the same stop sent twice,
            raise Stopped  # as `timeout` does (to the process, and to its group)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    # Spark's JVM starts (in a thread) from the file's spark block while the rest is imported and
    # validated here; a configuration refused stops it again (exit status 2, as before)
    from headwater.spark.session import EarlySession

    early = EarlySession(_document(config), debug=debug)
    try:
        cfg = _load(config)
    except SystemExit:
        with contextlib.suppress(BaseException):
            early.stop()
        raise
    from headwater.cli.progress import Progress

    spark = None
    try:
        from headwater.spark.pipeline import query_observer, start_query

        spark = early.get(cfg)
        signal.signal(signal.SIGINT, on_signal)  # PySpark's SparkContext installed its own
        if stop.is_set():
            raise Stopped
        query = start_query(spark, cfg, once=once, console=out)
        observed = query_observer(query)
        running.set()
        progress = Progress(cfg, query, interactive=sys.stdout.isatty() and cfg.sink.type != "console",
                            observer=observed.observer if observed is not None else None)
        try:
            with progress:
                while query.isActive:
                    if stop.is_set():
                        progress.note("stopping after the batch in flight")
                        deadline = time.monotonic() + 120
                        while _batch_in_flight(query) and time.monotonic() < deadline:
                            time.sleep(0.1)
                        query.stop()
                        break
                    query.awaitTermination(0.5)
                    progress.update()
                if observed is not None:  # the listener counts the last batch after Spark committed it
                    observed.wait_counted()
            exc = query.exception()
            if exc is not None and not stop.is_set():
                raise exc
            progress.finish()
        finally:
            if observed is not None:
                observed.close()
        spark.stop()
    except SystemExit:
        raise
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            # SIGINT in the moment between PySpark's SparkContext installing its handler (which
            # raises this) and headwater installing its own again: a stop all the same
            stop.set()
        if not stop.is_set():
            _fail(exc, debug)
        # stopped: an error now is the stop itself (the JVM, signalled with the same process group,
        # went first)
        if debug and not isinstance(exc, Stopped):
            raise
        if spark is not None:
            with contextlib.suppress(BaseException), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # PySpark's warning that the JVM has gone already
                spark.stop()
        err.print("stopped")
    sys.exit(0)


@cli.command()
@click.argument("config", type=click.Path())
@click.pass_context
def status(ctx: click.Context, config: str) -> None:
    """Show the stored positions, how far the source is ahead of them, and the last metrics."""
    cfg = _load(config)
    from headwater.cli.status import metrics_lines
    from headwater.connectors.registry import create_source
    from headwater.observe.metrics import metrics_path, read_file
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
        connector = create_source(cfg.source)
        try:
            st = connector.status(info.get("committed_offset"))
        finally:
            connector.close()
    except BaseException as exc:
        _fail(exc, ctx.obj["debug"])
        return
    for k, v in st.items():
        out.print(f"  {k}: {v}", markup=False)
    doc = read_file(metrics_path(Path(cfg.spark.checkpoint).expanduser()))
    for line in metrics_lines(doc) if doc is not None else ["no metrics written yet"]:
        out.print(line, markup=False)


@cli.command(name="signal")
@click.argument("config", type=click.Path())
@click.argument("type_", metavar="TYPE")
@click.option("--data", default=None, help="The signal's data, a JSON object.")
@click.option("--id", "id_", default=None, help="The signal's id (a new UUID when not given).")
def signal_command(config: str, type_: str, data: str | None, id_: str | None) -> None:
    """Send a signal (execute-snapshot, stop-snapshot, pause-snapshot, resume-snapshot, log) to a
    running or stopped pipeline: it is kept beside the checkpoint and acted on once."""
    import json

    from headwater.connectors.common.signals import BadSignal, append_signal, cli_file

    cfg = _load(config)
    path = cli_file(cfg.source, Path(cfg.spark.checkpoint).expanduser())
    if path is None:
        err.print(f"[bold red]the {cfg.source.connector} connector does not take signals yet[/bold red]")
        sys.exit(2)
    try:
        parsed = json.loads(data) if data else {}
        sent = append_signal(path, type_, parsed, id_)
    except json.JSONDecodeError as exc:
        err.print(f"[bold red]--data is not JSON:[/bold red] {exc}")
        sys.exit(2)
    except BadSignal as exc:
        err.print(f"[bold red]the signal is not valid:[/bold red] {exc}")
        sys.exit(2)
    out.print(f"signal {sent.id} ({sent.type}) queued in {path}; a running pipeline acts on it within "
              f"signal.poll.interval.ms, a stopped one when it starts", markup=False)


def main() -> None:
    cli(prog_name="headwater")


if __name__ == "__main__":
    main()
