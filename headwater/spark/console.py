"""The console sink: each batch's events printed on the driver (for trying things out)."""

from __future__ import annotations

from rich.console import Console


def console_batch(console: Console | None = None):
    """A foreachBatch function printing topic, op, key and value of every event."""
    out = console or Console()

    def show(df, batch_id: int) -> None:
        rows = df.select("topic", "op", "key", "value").collect()
        if not rows:
            return
        out.print(f"[bold]batch {batch_id}[/bold]: {len(rows)} events")
        for r in rows:
            out.print(f"{r.topic} {r.op or '-'} key={r.key} value={r.value}", markup=False,
                      highlight=False, soft_wrap=True)

    return show
