"""report's page: a run's curves and timeline, self-contained, every user string escaped; and
the terminal's sparkline. The page is opened in a real headless browser (Debian's chromium),
and what plotly.js drew is read back from the DOM: a line per curve, a marker per event."""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path

import pytest

from nrl_launch.errors import ExitCode, UsageError
from nrl_launch.jobs import report
from nrl_launch.jobs.report import Curve, Event, page, phases, sparkline
from tests.browser import Elements, drawn, rendered
from tests.conftest import unavailable
from tests.helpers import imported, roots

T0 = 1_700_000_000.0
# A run label as an override could make it: tags, a script's end, entities and quotes.
HOSTILE = "lr=1e-4 </script><script>alert(1)</script><b>x</b> &amp; \"q\" 's'"
RUNS = ("4242", HOSTILE)
METRICS = ("reward", "loss")


def curves() -> list[Curve]:
    """2 runs x 2 metrics, 15 steps each."""
    return [
        Curve(run, metric, tuple((step, math.sin(step / 5 + i) + j) for step in range(0, 30, 2)))
        for i, run in enumerate(RUNS)
        for j, metric in enumerate(METRICS)
    ]


def events() -> list[Event]:
    """Each run queued, brought up, stepping, saving, ended: 7 events a run."""
    timeline = []
    for i, run in enumerate(RUNS):
        at = T0 + 300 * i
        timeline += [
            Event(run, at, "queued", "queue"),
            Event(run, at + 120, "started", "bringup"),
            Event(run, at + 150, "head up", "bringup"),
            Event(run, at + 180, "all joined", "bringup"),
            Event(run, at + 240, "step 10", "step"),
            Event(run, at + 300, "saved step 20", "save"),
            Event(run, at + 420, f"ended: {HOSTILE}", "end"),
        ]
    return timeline


@pytest.fixture
def plotly() -> None:
    if importlib.util.find_spec("plotly") is None:
        unavailable("plotly is not installed: pip install -e '.[dev,report]'")


@pytest.mark.usefixtures("plotly")
def test_a_user_string_is_shown_as_typed_and_cannot_leave_its_script() -> None:
    title = "run </title><script>alert(1)</script> & co"
    summary = [("job </th>", HOSTILE), ("cause", "<img src=x onerror=alert(1)>")]
    text = page(title, curves(), events(), summary=summary)
    elements = Elements(text)

    # The page's own markup: the title, the heading and the table say what was typed.
    assert [t.text for t in elements.select("title")] == [title]
    assert [h.text for h in elements.select("h1")] == [title]
    assert [h.text for h in elements.select("th")] == ["job </th>", "cause"]
    assert [d.text for d in elements.select("td")] == [HOSTILE, summary[1][1]]
    assert elements.select("img") == [] and elements.select("b") == []
    # plotly.js, then one script per figure (2 metrics, the timeline), each whole: none that a
    # label began, none that a label ended early.
    scripts = elements.select("script")
    assert len(scripts) == 1 + len(METRICS) + 1
    assert all(s.text.strip().endswith("};") and "Plotly.newPlot" in s.text for s in scripts[1:])
    assert "</script><script>alert" not in text and "<b>x</b>" not in text


@pytest.mark.usefixtures("plotly")
def test_the_page_is_self_contained() -> None:
    from plotly.offline import get_plotlyjs

    text = page("run", curves(), events())
    elements = Elements(text)
    assert [s.get("src") for s in elements.select("script")] == [""] * 4  # none fetched
    assert elements.select("link") == [] and elements.select("iframe") == []
    remote = [
        e for e in elements.found if re.match(r"\s*(https?:)?//", e.get("src") + e.get("href"))
    ]
    assert remote == []
    assert get_plotlyjs() in text  # plotly.js itself, inlined
    assert len(elements.select("div", "plotly-graph-div")) == len(METRICS) + 1


@pytest.mark.usefixtures("plotly")
def test_no_curves_no_events_is_said_in_words_with_no_plot() -> None:
    text = page("run", [Curve("4242", "reward", ()), Curve("4242", "loss", ((1, math.nan),))], [])
    assert [p.text for p in Elements(text).select("p", "empty")] == [
        report.NO_METRICS,
        report.NO_EVENTS,
    ]
    assert "plotly-graph-div" not in text and "Plotly.newPlot" not in text
    assert len(text) < 10_000  # no plotly.js when there is nothing to plot


def test_without_plotly_the_page_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "plotly", None)  # importing it fails, as uninstalled
    with pytest.raises(UsageError) as raised:
        page("run", curves(), events())
    assert raised.value.exit_code == ExitCode.BAD_INPUT
    assert "\n" not in raised.value.message
    assert "pip install 'nrl-launch[report]'" in raised.value.message


def test_importing_the_module_does_not_import_plotly() -> None:
    modules = imported(code="import nrl_launch.jobs.report")
    assert "nrl_launch.jobs.report" in modules and "plotly" not in roots(modules)


def test_a_requeued_run_waits_and_runs_twice_and_an_end_closes_it() -> None:
    run = [
        Event("7", 0, "queued", "queue"),
        Event("7", 10, "started", "bringup"),
        Event("7", 15, "note", "other"),  # a kind of no phase: still running
        Event("7", 20, "step 1", "step"),
        Event("7", 30, "requeued", "requeue"),
        Event("7", 45, "driver started", "bringup"),
        Event("7", 60, "ended: COMPLETED", "end"),
        Event("7", 70, "try 2", "try"),  # waits for its start, shown up to its last event: none
    ]
    assert phases(list(reversed(run))) == [
        ("waiting", 0, 10),
        ("running", 10, 30),
        ("waiting", 30, 45),
        ("running", 45, 60),
    ]
    assert phases(run[:4]) == [("waiting", 0, 10), ("running", 10, 20)]  # running still
    assert phases([]) == [] and phases(run[-1:]) == []


# ---- sparkline ----


def test_sparkline_spans_the_blocks_low_to_high() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([3.0, 1.0, 2.0]) == "█▁▅"  # one character per value when shorter than width


def test_sparkline_is_resampled_to_its_width() -> None:
    line = sparkline([float(v) for v in range(1000)], width=20)
    assert len(line) == 20 and line[0] == "▁" and line[-1] == "█"
    assert list(line) == sorted(line)  # bucket means of a rising series still rise
    assert sparkline([0, 10] * 50, width=10) == "▄" * 10  # every bucket's mean is 5: flat


def test_sparkline_flat_empty_and_nan() -> None:
    assert sparkline([2.5, 2.5, 2.5]) == "▄▄▄"
    assert sparkline([]) == "" and sparkline([math.nan, math.inf]) == ""
    assert sparkline([0.0, math.nan, 1.0, -math.inf]) == "▁█"
    with pytest.raises(ValueError, match="at least 1"):
        sparkline([1.0], width=0)


# ---- in a browser ----


@pytest.mark.usefixtures("plotly")
def test_the_browser_draws_a_line_per_curve_and_a_marker_per_event(tmp_path: Path) -> None:
    elements = rendered(page("two runs", curves(), events()), tmp_path)
    # Each metric's plot: a line per run (the legend draws a short js-line per trace too, outside
    # the scatterlayer: not counted), under the metric's title.
    for index, metric in enumerate(METRICS):
        figure = f"metric-{index}"
        lines = drawn(elements.select("path", "js-line", inside=(figure, "scatterlayer")))
        assert len(lines) == len(RUNS), metric
        assert [t.text for t in elements.select("text", "gtitle", inside=(figure,))] == [metric]
    assert len(drawn(elements.select("path", "js-line", inside=("scatterlayer",)))) == len(curves())
    # The timeline: a marker per event, a bar for each run's time waiting and its time running.
    markers = elements.select("path", "point", inside=("timeline", "scatterlayer"))
    assert len(drawn(markers)) == len(events())
    assert len(drawn(elements.select("path", inside=("timeline", "barlayer")))) == 2 * len(RUNS)
    # The hostile label is shown as typed: in the legends, and as the timeline's row.
    legend = [t.text for t in elements.select("text", "legendtext")]
    assert legend.count(HOSTILE) == len(METRICS)
    assert {"waiting", "running", "queued", "bring-up", "ended"} <= set(legend)
    rows = [t.text for t in elements.select("text", inside=("timeline", "ytick"))]
    assert sorted(rows) == sorted(RUNS)


@pytest.mark.usefixtures("plotly")
def test_the_browser_shows_a_page_with_nothing_to_plot_in_words(tmp_path: Path) -> None:
    elements = rendered(page("nothing yet", [], []), tmp_path)
    assert [p.text for p in elements.select("p", "empty")] == [
        report.NO_METRICS,
        report.NO_EVENTS,
    ]
    assert elements.select("div", "plotly-graph-div") == []
    assert elements.select("path") == []
