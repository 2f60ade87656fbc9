"""The README stays a five-minute read and its map stays true; every page of docs/ is in the
site's nav (mkdocs.yml). Cheap: no mkdocs here (CI builds the site with `mkdocs build --strict`,
which checks the links between the pages and their anchors)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import yaml

from tests.conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor, as Python-Markdown's toc extension (mkdocs) and GitHub make it."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def headings(page: Path) -> list[tuple[int, str]]:
    """`page`'s headings (outside code blocks), as (level, text), in order."""
    found, fence = [], False
    for line in page.read_text().splitlines():
        fence ^= line.startswith("```")
        if not fence and (heading := re.match(r"(#+) (.+)", line)):
            found.append((len(heading[1]), heading[2]))
    return found


def anchors(page: Path) -> set[str]:
    """The anchors of `page`'s headings."""
    return {slug(text) for _, text in headings(page)}


def nav_pages(nav: object) -> list[str]:
    """Every page mkdocs.yml's nav lists, however deep its sections."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    assert isinstance(nav, list), nav
    return [page for entry in nav for page in nav_pages(entry)]


def test_the_readme_is_at_most_300_lines() -> None:
    lines = README.read_text().count("\n")  # as `wc -l` counts them
    assert lines <= 300, f"README.md has {lines} lines: move the rest into docs/"


def test_every_docs_page_is_in_the_nav_and_every_nav_page_exists() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert config.get("docs_dir", "docs") == "docs" and config["strict"] is True
    listed = nav_pages(config["nav"])
    assert len(listed) == len(set(listed)), listed
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages <= set(listed), f"not in mkdocs.yml's nav: {sorted(pages - set(listed))}"
    assert set(listed) <= pages, f"in the nav, not in docs/: {sorted(set(listed) - pages)}"


def test_every_docs_page_has_one_title_first() -> None:
    """A page moved out of the README starts with its one `# ` title, its sections below it."""
    for page in sorted(DOCS.rglob("*.md")):
        found = headings(page)
        titles = [text for level, text in found if level == 1]
        assert page.read_text().startswith("# ") and len(titles) == 1, f"{page.name}: {titles}"


def test_the_readme_links_resolve() -> None:
    """Each relative link of the README (its map of docs/ included) names a file or directory
    of the repository, and a heading of it when it has an anchor."""
    links = [t for t in LINK.findall(README.read_text()) if not re.match(r"[a-z]+:", t)]
    assert links
    for target in links:
        path, _, anchor = target.partition("#")
        page = REPO / path if path else README
        assert page.exists(), f"README.md links to {target}: no {path} in the repository"
        if anchor:
            assert anchor in anchors(page), f"README.md links to {target}: no such heading"


def test_the_readme_maps_every_docs_page() -> None:
    linked = set(LINK.findall(README.read_text()))
    for page in sorted(DOCS.rglob("*.md")):
        name = str(page.relative_to(REPO))
        assert name in linked, f"the README's map has no line for {name}"


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    """The README's Test section gives exactly the command .ci/run runs for the whole suite."""
    section = README.read_text().split("\n## Test\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    assert block.splitlines() == ["python -m pytest"]
    assert "python -m pytest || rc=$?" in (REPO / ".ci" / "run").read_text().splitlines()
