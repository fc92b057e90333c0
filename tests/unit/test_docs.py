"""The documentation holds together: every relative link and anchor resolves, the README
stays a first screen plus a short tour, and its commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs import ROOT, doc_text, marked_block

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file (headings inside code fences left out)."""
    anchors, fence = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"#{1,6} (.*)", line)):
            anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return anchors


def _outside_fences(text: str) -> str:
    return "".join(part for i, part in enumerate(text.split("```")) if i % 2 == 0)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(_outside_fences(page.read_text())):
        if re.match(r"[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = doc_text("README")
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if f"](docs/{p.name})" not in readme]
    assert not missing, f"docs pages the README's table does not link: {missing}"


def test_readme_is_short() -> None:
    """Reference material lives in docs/: the README is what a newcomer reads first."""
    lines = doc_text("README").count("\n")
    assert lines <= 150, f"README.md has {lines} lines; move reference material to docs/"


def test_readme_commands_are_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert marked_block("README", "main-command").strip() == "pip install -e . && python -m pytest scenarios -n 2"
    assert "<!-- main-command -->" in ci and "<!-- test-command -->" in ci
    assert marked_block("README", "test-command").strip().startswith("pip install -e '.[test]' && python -m pytest tests")


def test_readme_makes_a_virtual_environment_before_its_first_commands() -> None:
    """The first screen makes a venv (outside the markers: CI's commands stay as they are),
    then the two commands, and ends within 40 lines."""
    text = doc_text("README")
    venv = text.find("\npython -m venv .venv && . .venv/bin/activate\n")
    assert 0 <= venv < text.index("<!-- main-command -->"), "README: no venv line before the main command"
    first_screen = text.split("<!-- /test-command -->", 1)[0].count("\n") + 1
    assert first_screen <= 40, f"README's first screen takes {first_screen} lines to its test command"
