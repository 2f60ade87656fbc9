"""A run's report as one self-contained HTML page: its metric curves and its timeline.

Pure: data in, an HTML string out (`report` writes it; nothing here reads jobs or files). The
plots are plotly's, with plotly.js inlined so the page opens offline, on a cluster's login node
as well as on a laptop. plotly is the optional extra `report` (`pip install 'nrl-launch[report]'`)
and is imported only inside `page`: importing this module stays cheap, and `sparkline` (the
terminal's small curve, for `status`) needs no plotly at all.

Every string a user chose (the title, run labels from job names and overrides, event text,
the summary) is escaped: what this module writes into the HTML with html.escape; what it hands to
plotly with `&`, `<` and `>` escaped too, since plotly.js reads a few tags in its text (`<b>`,
`<br>`, `<a href>`) and shows entities as the characters they stand for.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from nrl_launch.errors import UsageError

__all__ = [
    "INSTALL_HINT",
    "NO_EVENTS",
    "NO_METRICS",
    "Curve",
    "Event",
    "page",
    "phases",
    "sparkline",
]

INSTALL_HINT = "the report's plots need plotly: pip install 'nrl-launch[report]'"
NO_METRICS = "No metrics yet: none of these runs has logged a step."
NO_EVENTS = "No events yet: none of these runs has been queued."

# One colour per run, the same in every plot (plotly's own ten, in its order).
RUN_COLOURS: tuple[str, ...] = ("#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A")
RUN_COLOURS += ("#19d3f3", "#FF6692", "#B6E880", "#FF97FF", "#FECB52")
# An event kind's marker on the timeline: its colour, its symbol and its legend's name.
EVENT_MARKERS = {
    "queue": ("#7f7f7f", "circle", "queued"),
    "bringup": ("#1f77b4", "triangle-up", "bring-up"),
    "step": ("#2ca02c", "circle", "step"),
    "save": ("#9467bd", "square", "checkpoint saved"),
    "try": ("#ff7f0e", "diamond", "new try"),
    "requeue": ("#e377c2", "triangle-down", "requeued"),
    "end": ("#d62728", "x", "ended"),
}
OTHER_MARKER = ("#bcbd22", "circle", "other")
# What a run is doing after an event of each kind: waiting (in the queue) or running. An end
# closes the run's last phase; a kind not listed here leaves the phase as it was.
PHASE_AFTER = {
    "queue": "waiting",
    "requeue": "waiting",
    "try": "waiting",  # a new try is a new job, queued until it starts
    "bringup": "running",
    "step": "running",
    "save": "running",
}
PHASE_COLOURS = {"waiting": "#d9d9d9", "running": "#c6dbef"}
SPARK_BLOCKS = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Curve:
    """One run's values of one metric, by step."""

    run: str  # a job id, or an experiment point's label ("lr=1e-4 seed=1")
    metric: str  # "reward", "loss", ...
    points: tuple[tuple[int, float], ...]  # (step, value)


@dataclass(frozen=True)
class Event:
    """One thing that happened to a run, at a wall-clock time."""

    run: str
    at: float  # epoch seconds
    what: str  # "queued", "started", "step 10", "saved step 20", "try 2", "ended: <cause>"...
    kind: str  # queue, bringup, step, save, try, requeue or end (its marker on the timeline)


def page(
    title: str,
    curves: Sequence[Curve],
    events: Sequence[Event],
    *,
    summary: Sequence[tuple[str, str]] = (),
) -> str:
    """One self-contained HTML page (no network needed to view it): one plot per metric, one
    line per run; the timeline (events per run over wall time); a small summary table (key,
    value). Where there are no curves (or no events) the page says so in words.

    Raises:
        UsageError: plotly is not installed (one line: how to install it).
    """
    go, pio, plotlyjs = _plotly()
    drawn = [c for c in curves if any(math.isfinite(v) for _, v in c.points)]
    colours = _run_colours([*(c.run for c in drawn), *(e.run for e in events)])
    figures = [
        (
            f"metric-{index}",
            _metric_figure(go, metric, [c for c in drawn if c.metric == metric], colours),
        )
        for index, metric in enumerate(dict.fromkeys(c.metric for c in drawn))
    ]
    metrics_html = "".join(_div(pio, div_id, fig) for div_id, fig in figures)
    timeline_html = _div(pio, "timeline", _timeline_figure(go, events, colours)) if events else ""
    rows = "".join(
        f"<tr><th>{html.escape(key)}</th><td>{html.escape(value)}</td></tr>"
        for key, value in summary
    )
    bundle = f"<script>{plotlyjs}</script>" if metrics_html or timeline_html else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; color: #222; }}
table.summary {{ border-collapse: collapse; margin-bottom: 1em; }}
table.summary th, table.summary td {{ text-align: left; padding: .2em .8em; }}
table.summary th {{ color: #555; font-weight: normal; }}
p.empty {{ color: #555; font-style: italic; }}
</style>
{bundle}
</head>
<body>
<h1>{html.escape(title)}</h1>
{f'<table class="summary">{rows}</table>' if rows else ""}
<h2>Metrics</h2>
<section id="metrics">{metrics_html or f'<p class="empty">{NO_METRICS}</p>'}</section>
<h2>Timeline</h2>
<section id="events">{timeline_html or f'<p class="empty">{NO_EVENTS}</p>'}</section>
</body>
</html>
"""


def sparkline(values: Sequence[float], width: int = 20) -> str:
    """A terminal's small curve of VALUES, at most WIDTH characters of ▁▂▃▄▅▆▇█: a longer series
    is averaged into WIDTH buckets, a shorter one takes a character per value. NaN (and
    infinities) are skipped; a flat series is a flat line at mid height; none at all is ""."""
    if width < 1:
        raise ValueError(f"sparkline width must be at least 1, not {width}")
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) > width:
        bounds = [len(finite) * i // width for i in range(width + 1)]
        finite = [math.fsum(finite[lo:hi]) / (hi - lo) for lo, hi in itertools.pairwise(bounds)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    if high == low:
        return SPARK_BLOCKS[len(SPARK_BLOCKS) // 2 - 1] * len(finite)
    top = len(SPARK_BLOCKS) - 1
    return "".join(SPARK_BLOCKS[round((v - low) / (high - low) * top)] for v in finite)


# ---- plotly ----


def _plotly() -> tuple[Any, Any, str]:
    """plotly's graph objects, its io and the plotly.js bundle, or one line on how to install."""
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return go, pio, str(get_plotlyjs())


def _text(value: str) -> str:
    """VALUE as plotly.js shows it literally: none of its tags read, entities shown as typed."""
    return html.escape(value, quote=False)


def _run_colours(runs: Sequence[str]) -> dict[str, str]:
    """Each run's colour, in the order the runs first appear."""
    ordered = dict.fromkeys(runs)
    return {run: RUN_COLOURS[i % len(RUN_COLOURS)] for i, run in enumerate(ordered)}


def _div(pio: Any, div_id: str, figure: Any) -> str:
    return str(
        pio.to_html(
            figure,
            include_plotlyjs=False,
            full_html=False,
            div_id=div_id,
            default_height=f"{figure.layout.height}px",
            config={"displaylogo": False, "responsive": True},
        )
    )


def _metric_figure(go: Any, metric: str, curves: Sequence[Curve], colours: dict[str, str]) -> Any:
    """METRIC by step, a line per run (the same run's colour as in every other plot)."""
    figure = go.Figure()
    for curve in curves:
        points = sorted(curve.points)
        figure.add_trace(
            go.Scatter(
                x=[step for step, _ in points],
                y=[value if math.isfinite(value) else None for _, value in points],
                name=_text(curve.run),
                mode="lines+markers" if len(points) < 50 else "lines",
                line={"color": colours[curve.run]},
                marker={"size": 4},
            )
        )
    figure.update_layout(
        title={"text": _text(metric)},
        xaxis={"title": {"text": "step"}},
        yaxis={"title": {"text": _text(metric)}},
        template="plotly_white",
        height=360,
        margin={"t": 48, "b": 40},
    )
    return figure


def _utc(at: float) -> datetime:
    """Epoch seconds as a naive UTC time (plotly.js reads a date without a zone as given)."""
    return datetime.fromtimestamp(at, tz=timezone.utc).replace(tzinfo=None)


def phases(events: Sequence[Event]) -> list[tuple[str, float, float]]:
    """A run's phases between its events, in time order: (waiting or running, from, to), each
    as long as the events say (an event of a kind not in PHASE_AFTER leaves the phase as it was;
    an end closes it; a run not ended is shown up to its last event)."""
    spans: list[tuple[str, float, float]] = []
    phase: str | None = None
    began = 0.0
    for event in sorted(events, key=lambda e: e.at):
        after = None if event.kind == "end" else PHASE_AFTER.get(event.kind, phase)
        if after != phase:
            if phase is not None and event.at > began:
                spans.append((phase, began, event.at))
            phase, began = after, event.at
    last = max((e.at for e in events), default=began)
    if phase is not None and last > began:
        spans.append((phase, began, last))
    return spans


def _timeline_figure(go: Any, events: Sequence[Event], colours: dict[str, str]) -> Any:
    """A row per run over wall-clock time: its phases as bars, its events as markers."""
    runs = [run for run in colours if any(e.run == run for e in events)]
    figure = go.Figure()
    bars: dict[str, list[tuple[str, float, float]]] = {"waiting": [], "running": []}
    for run in runs:
        for phase, began, ended in phases([e for e in events if e.run == run]):
            bars[phase].append((run, began, ended))
    for phase, segments in bars.items():
        if not segments:
            continue
        figure.add_trace(
            go.Bar(
                orientation="h",
                y=[_text(run) for run, _, _ in segments],
                base=[_utc(began) for _, began, _ in segments],
                x=[(ended - began) * 1000 for _, began, ended in segments],
                name=phase,
                marker={"color": PHASE_COLOURS[phase]},
                hovertext=[
                    f"{_text(run)}<br>{phase} {duration(ended - began)}"
                    for run, began, ended in segments
                ],
                hoverinfo="text",
            )
        )
    for kind in dict.fromkeys(e.kind for e in sorted(events, key=lambda e: e.at)):
        colour, symbol, label = EVENT_MARKERS.get(kind, OTHER_MARKER)
        of_kind = [e for e in events if e.kind == kind]
        figure.add_trace(
            go.Scatter(
                x=[_utc(e.at) for e in of_kind],
                y=[_text(e.run) for e in of_kind],
                mode="markers",
                name=label if kind in EVENT_MARKERS else _text(kind),
                marker={"color": colour, "symbol": symbol, "size": 10},
                hovertext=[
                    f"{_text(e.run)}<br>{_text(e.what)}<br>{_utc(e.at):%Y-%m-%d %H:%M:%S} UTC"
                    for e in of_kind
                ],
                hoverinfo="text",
            )
        )
    figure.update_layout(
        barmode="overlay",
        xaxis={"type": "date", "title": {"text": "time (UTC)"}},
        # Job ids are numbers: the rows stay categories, the first run at the top.
        yaxis={
            "type": "category",
            "categoryorder": "array",
            "categoryarray": [_text(run) for run in reversed(runs)],
        },
        template="plotly_white",
        # The legend (phases, event kinds) in a row above the rows, so it never scrolls.
        legend={"orientation": "h", "x": 0, "y": 1, "yanchor": "bottom"},
        height=160 + 40 * len(runs),
        margin={"t": 48, "b": 40},
    )
    return figure


def duration(seconds: float) -> str:
    """A duration as a person reads it: 42 s, 3 min, 3 h 05 min, 2 d 4 h."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3570:  # rounded to the minute: 173 s is 3 min
        return f"{round(s / 60)} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"
