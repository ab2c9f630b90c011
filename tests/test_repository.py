"""The repository stands alone: a licence, a README that starts with the quickstart, docs whose
links resolve, no pointer to anything outside the repository, dependency ranges with exact pins."""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Pointers to design notes, specifications and issue trackers that live outside the repository.
OUTSIDE = re.compile(
    "|".join(
        [
            r"\.\./" + "shared",
            "spec " + "§",
            "§" + r" ?\d",
            "ARCHITECTURE" + r"\.md",
            r"reference/[a-z-]+\.md",
            r"\b" + "issue" + r" \d+",
            "reliability" + r"\.md",
        ]
    )
)


def _texts() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / ".ci" / "run"]
    for folder in ("src", "tests", "bench", "scripts"):
        files += sorted((ROOT / folder).rglob("*.py"))
    return files


def test_nothing_points_outside_the_repository() -> None:
    found = []
    for path in _texts():
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []


def test_readme_starts_with_the_two_command_quickstart() -> None:
    text = (ROOT / "README.md").read_text()
    sections = text.split("\n## ")
    assert sections[0].startswith("# spate\n")
    assert sections[1].startswith("Quickstart\n")
    commands = re.findall(r"^python3 scripts/dev\.py (\w+)", sections[1], re.M)
    assert commands == ["demo", "test"]


def test_links_in_readme_and_docs_resolve() -> None:
    broken = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" in target:
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert broken == []
    assert (ROOT / "docs" / "architecture.md").exists()


def test_the_declared_license_is_there() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "Apache-2.0"}
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text


def test_dependencies_are_ranges_pinned_in_constraints() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    pins = {
        line.split("==")[0].lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    for requirement in wanted:
        assert "==" not in requirement, f"{requirement}: declare a range, pin in constraints.txt"
        assert ">=" in requirement and "<" in requirement, requirement
        name = re.split(r"[\[<>=]", requirement)[0].lower().replace("_", "-")
        assert name in pins, f"{name} has no exact pin in constraints.txt"


MAX_MODULE_LINES = 600
"""Modules are cut by concept, never by a line count: a module longer than this is worth a look
(is it one concept?), not a failure. The test warns, naming each."""


def test_long_modules_are_named_in_a_warning() -> None:
    lines = {
        path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
        for path in sorted((ROOT / "src" / "spate").rglob("*.py"))
    }
    over = sorted(f"{p}: {n} lines" for p, n in lines.items() if n > MAX_MODULE_LINES)
    if over:
        warnings.warn(
            f"modules over {MAX_MODULE_LINES} lines (one concept each?): {over}", stacklevel=1
        )
    assert lines, "no module found under src/spate"
