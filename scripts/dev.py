#!/usr/bin/env python3
"""Install what spate needs into ./.venv, then run it. Standard library only.

    python3 scripts/dev.py demo [ARGS]   install spate, run `spate demo`
    python3 scripts/dev.py test [ARGS]   install spate with test tools, run the whole test suite
    python3 scripts/dev.py lint          ruff, mypy --strict and the import-layer contract
                                         (CI runs this after the tests)

Needs Python 3.11+ and Java 17+ (for Spark). pyproject.toml declares the dependencies as version
ranges; constraints.txt pins the exact versions installed here and in CI. The virtual environment
is reused until either file changes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"

JAVA_HELP = """\
spate runs its dataflows on Apache Spark, which needs Java 17 or newer.
Install it, then run this command again:
  Debian/Ubuntu:  sudo apt-get install -y openjdk-17-jre-headless
  Fedora/RHEL:    sudo dnf install -y java-17-openjdk-headless
  macOS:          brew install openjdk@17   (then follow brew's note to put it on PATH)
  or download a JDK 17 from https://adoptium.net and set JAVA_HOME to it."""


def die(msg: str) -> None:
    print(f"spate: {msg}", file=sys.stderr)
    raise SystemExit(2)


def check_python() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs on any python3
        die(f"Python 3.11 or newer is needed; this is {sys.version.split()[0]}")


def check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        die("Java was not found.\n" + JAVA_HELP)
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        die(f"could not run {java} -version: {e}\n" + JAVA_HELP)
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        die(f"could not read the Java version from {java} -version.\n" + JAVA_HELP)
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0" style
        major = int(m.group(2))
    if major < 17:
        die(f"Java {major} found at {java}; Spark 4 needs Java 17 or newer.\n" + JAVA_HELP)


def ensure_venv(dev: bool) -> None:
    extras = ".[dev]" if dev else "."
    digest = hashlib.sha256()
    for name in ("pyproject.toml", "constraints.txt"):
        digest.update((ROOT / name).read_bytes())
    digest.update(extras.encode())
    stamp = VENV / ".spate-installed"
    wanted = digest.hexdigest()
    if stamp.exists() and stamp.read_text().split() and wanted in stamp.read_text().split():
        return
    if not PY.exists():
        print("spate: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print(f"spate: installing {extras} into .venv (first run takes a few minutes)", flush=True)
    pip = [str(PY), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "--upgrade", "pip==26.3"], check=True, cwd=ROOT)
    subprocess.run([*pip, "-c", "constraints.txt", "-e", extras], check=True, cwd=ROOT)
    done = set(stamp.read_text().split()) if stamp.exists() else set()
    # A dev install covers a plain one; remember both so switching commands does not reinstall.
    done.add(wanted)
    if dev:
        plain = hashlib.sha256()
        for name in ("pyproject.toml", "constraints.txt"):
            plain.update((ROOT / name).read_bytes())
        plain.update(b".")
        done.add(plain.hexdigest())
    stamp.write_text("\n".join(sorted(done)) + "\n")


def compile_sources() -> None:
    """Byte-compile spate's sources once. spate is installed editable, so nothing else does, and
    where PYTHONDONTWRITEBYTECODE is set every process (a replica, a test's server) would compile
    them again on import: about a third of its import CPU."""
    subprocess.run([str(PY), "-m", "compileall", "-q", "src"], check=True, cwd=ROOT)


def run(argv: list[str]) -> int:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.call(argv, cwd=ROOT, env=env)


def main() -> int:
    check_python()
    if len(sys.argv) < 2 or sys.argv[1] not in ("demo", "test", "lint"):
        print(__doc__)
        return 2
    command, rest = sys.argv[1], sys.argv[2:]
    if command == "demo":
        check_java()
        ensure_venv(dev=False)
        compile_sources()
        return run([str(BIN / "spate"), "demo", *rest])
    if command == "test":
        check_java()
        ensure_venv(dev=True)
        compile_sources()
        code = run([str(PY), "-m", "pytest", *rest])
        if code == 5:
            print("spate: pytest collected no tests; that is a failure", file=sys.stderr)
            return 1
        return code
    ensure_venv(dev=True)
    code = run([str(BIN / "ruff"), "check", "src", "tests", "bench", "scripts"])
    code = code or run([str(BIN / "ruff"), "format", "--check", "src", "tests", "bench", "scripts"])
    code = code or run([str(PY), "-m", "mypy", "--strict", "src"])
    return code or run([str(BIN / "lint-imports")])


if __name__ == "__main__":
    sys.exit(main())
