"""The documentation's examples, as the tests execute them (README.md and docs/*.md)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def doc_text(page: str) -> str:
    """``README`` or a page of ``docs/`` (``faults`` or ``docs/faults`` -> ``docs/faults.md``)."""
    name = page.removeprefix("docs/")
    return (ROOT / ("README.md" if name == "README" else f"docs/{name}.md")).read_text()


def section_example(page: str, section: str) -> str:
    """The first Python block under the ``## SECTION`` heading of a page."""
    text = doc_text(page)
    assert f"\n## {section}\n" in text, f"{page} lost its section {section!r}"
    return text.split(f"\n## {section}\n", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def marked_block(page: str, marker: str) -> str:
    """The fenced block between ``<!-- MARKER -->`` and ``<!-- /MARKER -->`` (fences removed)."""
    text = doc_text(page)
    assert f"<!-- {marker} -->" in text, f"{page} lost its <!-- {marker} --> block"
    inner = text.split(f"<!-- {marker} -->\n", 1)[1].split(f"<!-- /{marker} -->", 1)[0]
    return inner.split("\n", 1)[1].rsplit("```", 1)[0]
