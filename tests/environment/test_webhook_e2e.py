"""Webhook sources over HTTP against a real environment process: signed POSTs from 8
concurrent clients with the environment killed (SIGKILL) and restarted in between. Every
acknowledged POST is present exactly once; bad signatures and oversize bodies are refused
and write nothing.

``SPATE_WEBHOOK_E2E_POSTS`` sizes the run (default 400)."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from spate.config import Settings
from spate.environment.api import Environment
from spate.testing.kafka import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

POSTS = int(os.environ.get("SPATE_WEBHOOK_E2E_POSTS", "400"))
CLIENTS = 8
KEY = "s3cret"
CREATE = (
    "CREATE SOURCE hooks FROM WEBHOOK BODY FORMAT JSON CHECK (WITH (HEADERS, BODY AS b, "
    "SECRET hook_key) decode(headers->>'x-signature', 'hex') = hmac(b, hook_key, 'sha256'))"
)
SERVER = """
import sys, time
from pathlib import Path
from spate.config import Settings
from spate.environment.api import Environment

data, port = Path(sys.argv[1]), int(sys.argv[2])
env = Environment.open(settings=Settings(data_dir=data, webhook_port=port,
                                         webhook_max_body_bytes=4096))
if "hooks" not in env.names():
    env.sql("CREATE SECRET hook_key AS 'KEY'")
    env.sql(CREATE)
print("ready", flush=True)
while True:
    time.sleep(3600)
""".replace("KEY", KEY).replace("CREATE)", repr(CREATE) + ")")


def _start(script: Path, data: Path, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(script), str(data), str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", f"the server did not start: {line!r}"
    return proc


def _post(port: int, body: bytes, signature: str) -> int | None:
    """The status, or ``None`` if the connection failed after the request may have been sent
    (not acknowledged). A refused connection (the server is restarting; nothing was sent) is
    tried again."""
    deadline = time.monotonic() + 120
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.connect()
            break
        except ConnectionRefusedError:
            conn.close()
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)
    try:
        conn.request(
            "POST",
            "/api/webhook/materialize/public/hooks",
            body=body,
            headers={"x-signature": signature, "content-type": "application/json"},
        )
        status = conn.getresponse().status
        conn.close()
        return status
    except OSError:
        return None


def _sign(body: bytes, key: str = KEY) -> str:
    return hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def test_acknowledged_posts_are_present_exactly_once_across_kills(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    data = tmp_path / "data"
    port = free_port()
    procs = [_start(script, data, port)]
    try:
        _run(script, data, port, procs)
    finally:
        for p in procs:
            p.kill()  # those still running if the run failed


def _run(script: Path, data: Path, port: int, procs: list[subprocess.Popen[str]]) -> None:
    proc = procs[0]
    acked: list[int] = []
    refused: list[int] = []
    lock = threading.Lock()
    next_id = iter(range(POSTS))

    def client() -> None:
        for i in next_id:
            body = json.dumps({"id": i, "pad": "x" * (i % 50)}).encode()
            status = _post(port, body, _sign(body))  # never retried: a retry may duplicate
            with lock:
                if status == 200:
                    acked.append(i)
                elif status is not None:
                    refused.append(i)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    killed = 0
    while any(t.is_alive() for t in threads):
        time.sleep(0.2)
        if killed < 2 and len(acked) >= (killed + 1) * POSTS // 3:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            killed += 1
            proc = _start(script, data, port)
            procs.append(proc)
    for t in threads:
        t.join()
    assert killed == 2, f"only {killed} kills before the clients finished ({len(acked)} acked)"
    assert refused == []
    # Refusals write nothing.
    bad = json.dumps({"id": -1}).encode()
    assert _post(port, bad, _sign(bad, "wrong")) == 400
    big = json.dumps({"id": -2, "pad": "x" * 5000}).encode()
    assert _post(port, big, _sign(big)) == 413
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    with Environment.open(settings=Settings(data_dir=data)) as env:
        rows = env.select("hooks", timeout=120).to_pylist()
    ids = Counter(json.loads(r["body"])["id"] for r in rows)
    assert -1 not in ids and -2 not in ids
    assert all(ids[i] == 1 for i in acked), [i for i in acked if ids[i] != 1][:10]
    assert max(ids.values()) == 1  # nothing twice, acknowledged or not
    print(f"posts={POSTS} acked={len(acked)} present={len(ids)} kills={killed}")
