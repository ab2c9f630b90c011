"""spate as users install it: an sdist and a wheel build from the repository, and the wheel
installs into a clean virtual environment (no repository on the path) with its dependencies
pinned by ``constraints.txt``, where the ``spate`` command and the public API work."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from spate._version import __version__

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

_NETWORK = ("NewConnectionError", "Temporary failure in name resolution", "Network is unreachable")


def _norm(requirement: str) -> str:
    """A requirement's project name, normalised (PEP 503)."""
    name = re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _clean_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "JAVA_HOME", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
    return {k: v for k, v in os.environ.items() if k in keep or k.startswith("PIP_")}


def test_the_wheel_built_from_the_sdist_installs_into_a_clean_venv(tmp_path: Path) -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (sdist,) = dist.glob("spate-*.tar.gz")
    (wheel,) = dist.glob("spate-*.whl")
    assert meta["dynamic"] == ["version"]  # one version string: spate/_version.py
    assert sdist.name == f"spate-{__version__}.tar.gz"

    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ("pyproject.toml", "README.md", "LICENSE", "src/spate/__init__.py"):
        assert needed in names, f"{needed} missing from the sdist"

    with zipfile.ZipFile(wheel) as whl:
        files = set(whl.namelist())
        info = next(n for n in files if n.endswith(".dist-info/METADATA"))
        metadata = whl.read(info).decode()
        entry = whl.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert "spate/py.typed" in files and "spate/sql/__init__.py" in files
    assert not any(n.startswith("tests/") for n in files)
    assert "spate = spate.cli:main" in entry
    required = {
        _norm(line.split(":", 1)[1])
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    }
    for dep in meta["dependencies"]:  # ranges, as pyproject declares them
        assert _norm(dep) in required, f"{dep} is not required by the wheel"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
         "-c", str(ROOT / "constraints.txt"), str(wheel)],
        capture_output=True, text=True, env=_clean_env(), cwd=tmp_path, timeout=1000,
    )  # fmt: skip
    if pip.returncode != 0 and any(s in pip.stderr for s in _NETWORK):
        pytest.skip(f"the package index is unreachable from here:\n{pip.stderr[-400:]}")
    assert pip.returncode == 0, pip.stderr[-2000:]

    def run(*argv: str) -> str:
        out = subprocess.run(
            argv, capture_output=True, text=True, env=_clean_env(), cwd=tmp_path, timeout=300
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout

    version = run(str(venv / "bin" / "spate"), "--version")
    assert __version__ in version
    where = run(
        str(venv / "bin" / "python"),
        "-c",
        "import spate, spate.sql, spate.pgwire, spate.sources, spate.sinks; "
        "from spate import Environment, RelationDesc; print(spate.__file__)",
    )
    assert str(venv) in where and str(ROOT) not in where
    config = run(str(venv / "bin" / "spate"), "config", "--data-dir", str(tmp_path / "d"))
    assert "data_dir" in config
