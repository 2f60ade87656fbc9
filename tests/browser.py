"""A page as a reader's browser shows it: headless chromium runs its scripts (plotly.js draws),
and the DOM it leaves is read back as elements, each with the ids and classes above it."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from tests.conftest import unavailable


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    names: frozenset[str]  # the ids and classes of the element and of every element above it
    text: str = ""

    def get(self, name: str) -> str:
        return self.attrs.get(name, "")


class Elements(HTMLParser):
    """Every element of a page, in order: its tag, its attributes, the ids and classes above it
    and its own text (a <title>'s, a <script>'s, a <td>'s...)."""

    VOID = frozenset(
        (
            "area",
            "base",
            "br",
            "col",
            "embed",
            "hr",
            "img",
            "input",
            "link",
            "meta",
            "param",
            "source",
            "track",
            "wbr",
        )
    )

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[Element] = []
        self._open: list[Element] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        own = {values.get("id", ""), *values.get("class", "").split()} - {""}
        above = self._open[-1].names if self._open else frozenset()
        element = Element(tag, values, above | own)
        self.found.append(element)
        if tag not in self.VOID:
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self._open) - 1, -1, -1):
            if self._open[depth].tag == tag:
                del self._open[depth:]
                return

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1].text += data

    def select(
        self, tag: str, css_class: str = "", *, inside: tuple[str, ...] = ()
    ) -> list[Element]:
        """The elements TAG, of class CSS_CLASS when given, within elements of every id or class
        in INSIDE."""
        return [
            e
            for e in self.found
            if e.tag == tag
            and (not css_class or css_class in e.get("class").split())
            and e.names.issuperset(inside)
        ]


def rendered(text: str, tmp_path: Path) -> Elements:
    """The page as headless chromium leaves it once its scripts ran (plotly.js drew)."""
    browser = shutil.which("chromium")
    if browser is None:
        unavailable("chromium is not on PATH: apt-get install --no-install-recommends chromium")
    path = tmp_path / "report.html"
    path.write_text(text, encoding="utf-8")
    argv = [
        browser,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--window-size=1280,1024",
        "--virtual-time-budget=10000",
        "--dump-dom",
        path.as_uri(),
    ]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    return Elements(run.stdout)


def drawn(paths: list[Element]) -> list[Element]:
    """The paths with something to draw (plotly.js leaves an empty d where it drew nothing)."""
    return [p for p in paths if p.get("d").startswith("M")]
