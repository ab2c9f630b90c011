"""``spate persist …``: look inside the shards of a data directory (read-only).

``spate persist inspect <data-dir> <shard>`` prints a shard's since, upper, seqno, batches,
readers and writers (``--json`` for machine-readable output); ``spate persist shards
<data-dir>`` lists the shards. Both open the embedded location read-only and never create files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from spate.errors import SpateError
from spate.frontier.antichain import Antichain
from spate.ids import ShardId
from spate.persist.consensus_sqlite import SqliteConsensus
from spate.persist.state import ShardState
from spate.persist.state_codec import decode_state

app = typer.Typer(name="persist", help="Inspect persist shards (read-only).", no_args_is_help=True)


def _open(data_dir: Path) -> SqliteConsensus:
    db = data_dir / "consensus.db"
    if not db.exists():
        raise typer.BadParameter(f"no persist data in {data_dir} (missing {db.name})")
    return SqliteConsensus(db, read_only=True)


def _f(f: Antichain[int]) -> list[int]:
    return list(f.elements)


def state_summary(state: ShardState) -> dict[str, Any]:
    """The state as plain JSON-able data."""
    return {
        "shard": str(state.shard_id),
        "seqno": state.seqno,
        "since": _f(state.since),
        "upper": _f(state.upper),
        "tombstone": state.tombstone,
        "desc": str(state.desc) if state.desc is not None else None,
        "walltime_ms": state.walltime_ms,
        "updates": state.num_updates,
        "bytes": state.encoded_size,
        "batches": [
            {
                "lower": _f(b.lower),
                "upper": _f(b.upper),
                "since": _f(b.since),
                "updates": b.num_updates,
                "bytes": b.encoded_size,
                "parts": [p.key for p in b.parts],
            }
            for b in state.batches
        ],
        "writers": {
            str(w): {
                "last_heartbeat_ms": st.last_heartbeat_ms,
                "lease_ms": st.lease_duration_ms,
                "last_upper": _f(st.most_recent_upper),
            }
            for w, st in state.writers.items()
        },
        "leased_readers": {
            str(r): {
                "since": _f(st.since),
                "seqno": st.seqno,
                "last_heartbeat_ms": st.last_heartbeat_ms,
                "lease_ms": st.lease_duration_ms,
            }
            for r, st in state.leased_readers.items()
        },
        "critical_readers": {
            str(r): {"since": _f(st.since), "opaque": st.opaque}
            for r, st in state.critical_readers.items()
        },
    }


def _text(s: dict[str, Any]) -> str:
    def fr(x: list[int]) -> str:
        return "{" + ", ".join(map(str, x)) + "}"

    lines = [
        f"shard    {s['shard']}{'  (tombstone)' if s['tombstone'] else ''}",
        f"seqno    {s['seqno']}",
        f"since    {fr(s['since'])}",
        f"upper    {fr(s['upper'])}",
        f"desc     {s['desc']}",
        f"data     {s['updates']} updates, {s['bytes']} bytes in {len(s['batches'])} batches",
        "batches:",
    ]
    for b in s["batches"]:
        lines.append(
            f"  [{fr(b['lower'])}, {fr(b['upper'])}) since {fr(b['since'])}: "
            f"{b['updates']} updates, {b['bytes']} bytes, {len(b['parts'])} parts"
        )
    lines.append("writers:")
    for w, st in s["writers"].items():
        lines.append(
            f"  {w}  heartbeat {st['last_heartbeat_ms']}  last upper {fr(st['last_upper'])}"
        )
    lines.append("leased readers:")
    for r, st in s["leased_readers"].items():
        lines.append(
            f"  {r}  since {fr(st['since'])}  seqno {st['seqno']}  "
            f"heartbeat {st['last_heartbeat_ms']}"
        )
    lines.append("critical readers:")
    for r, st in s["critical_readers"].items():
        lines.append(f"  {r}  since {fr(st['since'])}  opaque {st['opaque']}")
    return "\n".join(lines)


@app.command()
def inspect(
    data_dir: Annotated[Path, typer.Argument(help="the spate data directory")],
    shard: Annotated[str, typer.Argument(help="the shard id (s<uuid>)")],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Print a shard's since, upper, batches, readers and writers."""
    try:
        shard_id = ShardId.parse(shard)
    except SpateError as e:
        raise typer.BadParameter(str(e)) from None
    consensus = _open(data_dir)
    try:
        head = consensus.head(str(shard_id))
    finally:
        consensus.close()
    if head is None:
        typer.echo(f"shard {shard_id} has no state in {data_dir}", err=True)
        raise typer.Exit(1)
    summary = state_summary(decode_state(head.data))
    typer.echo(json.dumps(summary, indent=2) if as_json else _text(summary))


@app.command()
def shards(data_dir: Annotated[Path, typer.Argument(help="the spate data directory")]) -> None:
    """List the shards with state in a data directory."""
    consensus = _open(data_dir)
    try:
        for key in consensus.list_keys():
            typer.echo(key)
    finally:
        consensus.close()
