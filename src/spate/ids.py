"""Identifiers that print with a prefix and parse their own printed form.

=================  =========================  ==========================================
id                 printed                    meaning
=================  =========================  ==========================================
``GlobalId``       ``s7`` / ``u42`` / ``t3``  a collection: system, user or transient
``InstanceId``     ``i1``                     a compute or storage instance (cluster)
``ReplicaId``      ``r1``                     one replica process of an instance
``ShardId``        ``s<uuid>``                a persist shard
``WriterId``       ``w<uuid>``                a persist writer (leased)
``ReaderId``       ``r<uuid>``                a persist leased reader
``CriticalReaderId`` ``c<uuid>``              a persist critical (since) reader
``PeekId``         ``<uuid>``                 one peek, unique within a protocol epoch
=================  =========================  ==========================================

Ids are never minted with ``uuid.uuid4()`` in core code: an :class:`IdGen` is injected, so that
simulations and tests are reproducible.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import ClassVar, Final, Literal, Protocol, Self

from spate.errors import InvalidId

GlobalIdKind = Literal["s", "u", "t"]
_GLOBAL_KIND_ORDER: Final[dict[str, int]] = {"s": 0, "u": 1, "t": 2}


@dataclass(frozen=True, slots=True)
class GlobalId:
    """A collection id. Orders system < user < transient, then by number.

    Dependents are created after their dependencies, so within one kind a dependent always has
    the larger id (the storage controller relies on this when propagating read holds).
    """

    kind: GlobalIdKind
    value: int

    def __post_init__(self) -> None:
        if self.kind not in _GLOBAL_KIND_ORDER:
            raise InvalidId(f"global id kind must be one of s, u, t; got {self.kind!r}")
        if isinstance(self.value, bool) or not isinstance(self.value, int) or self.value < 0:
            raise InvalidId(f"global id number must be a non-negative int, got {self.value!r}")

    @classmethod
    def system(cls, value: int) -> GlobalId:
        return cls("s", value)

    @classmethod
    def user(cls, value: int) -> GlobalId:
        return cls("u", value)

    @classmethod
    def transient(cls, value: int) -> GlobalId:
        return cls("t", value)

    @classmethod
    def parse(cls, text: str) -> GlobalId:
        if len(text) >= 2 and text[0] in _GLOBAL_KIND_ORDER and text[1:].isdigit():
            kind: GlobalIdKind = text[0]  # type: ignore[assignment]
            return cls(kind, int(text[1:]))
        raise InvalidId(f"not a global id: {text!r} (expected s<n>, u<n> or t<n>)")

    def is_transient(self) -> bool:
        return self.kind == "t"

    def is_user(self) -> bool:
        return self.kind == "u"

    def is_system(self) -> bool:
        return self.kind == "s"

    def _key(self) -> tuple[int, int]:
        return (_GLOBAL_KIND_ORDER[self.kind], self.value)

    def __lt__(self, other: GlobalId) -> bool:
        return self._key() < other._key()

    def __le__(self, other: GlobalId) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: GlobalId) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: GlobalId) -> bool:
        return self._key() >= other._key()

    def __str__(self) -> str:
        return f"{self.kind}{self.value}"

    def __repr__(self) -> str:
        return f"GlobalId({self})"


@dataclass(frozen=True, slots=True, order=True)
class _NumberedId:
    """An id that prints as a fixed prefix and a number."""

    value: int
    PREFIX: ClassVar[str] = "?"

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int) or self.value < 0:
            raise InvalidId(f"{type(self).__name__} must be a non-negative int, got {self.value!r}")

    @classmethod
    def parse(cls, text: str) -> Self:
        p = cls.PREFIX
        if text.startswith(p) and text[len(p) :].isdigit():
            return cls(int(text[len(p) :]))
        raise InvalidId(f"not a {cls.__name__}: {text!r} (expected {p}<n>)")

    def __str__(self) -> str:
        return f"{self.PREFIX}{self.value}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self})"


@dataclass(frozen=True, slots=True, order=True, repr=False)
class InstanceId(_NumberedId):
    """A compute or storage instance (cluster): ``i1``."""

    PREFIX: ClassVar[str] = "i"


@dataclass(frozen=True, slots=True, order=True, repr=False)
class ReplicaId(_NumberedId):
    """A replica of an instance: ``r1``."""

    PREFIX: ClassVar[str] = "r"


@dataclass(frozen=True, slots=True, order=True)
class _UuidId:
    """An id that prints as a fixed prefix and a UUID."""

    uuid: uuid.UUID
    PREFIX: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if not isinstance(self.uuid, uuid.UUID):
            raise InvalidId(f"{type(self).__name__} needs a UUID, got {self.uuid!r}")

    @classmethod
    def parse(cls, text: str) -> Self:
        p = cls.PREFIX
        if text.startswith(p):
            try:
                return cls(uuid.UUID(text[len(p) :]))
            except ValueError:
                pass
        raise InvalidId(f"not a {cls.__name__}: {text!r} (expected {p}<uuid>)")

    @classmethod
    def new(cls, ids: IdGen) -> Self:
        return cls(ids.uuid())

    def __str__(self) -> str:
        return f"{self.PREFIX}{self.uuid}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self})"


@dataclass(frozen=True, slots=True, order=True, repr=False)
class ShardId(_UuidId):
    """A persist shard: ``s<uuid>``."""

    PREFIX: ClassVar[str] = "s"


@dataclass(frozen=True, slots=True, order=True, repr=False)
class WriterId(_UuidId):
    """A persist writer: ``w<uuid>``."""

    PREFIX: ClassVar[str] = "w"


@dataclass(frozen=True, slots=True, order=True, repr=False)
class ReaderId(_UuidId):
    """A persist leased reader: ``r<uuid>``."""

    PREFIX: ClassVar[str] = "r"


@dataclass(frozen=True, slots=True, order=True, repr=False)
class CriticalReaderId(_UuidId):
    """A persist critical reader: ``c<uuid>``."""

    PREFIX: ClassVar[str] = "c"


CONTROLLER_CRITICAL_SINCE: Final[CriticalReaderId] = CriticalReaderId(
    uuid.UUID("00000000-1111-2222-3333-444444444444")
)
"""The fixed critical reader id the controllers use, so a restarted controller finds its since."""


@dataclass(frozen=True, slots=True, order=True, repr=False)
class PeekId(_UuidId):
    """A peek: a bare UUID, unique within a protocol epoch."""

    PREFIX: ClassVar[str] = ""


class IdGen(Protocol):
    """Source of fresh UUIDs, injected so that runs are reproducible."""

    def uuid(self) -> uuid.UUID: ...


class SystemIdGen:
    """Random UUIDs from the operating system (production)."""

    def uuid(self) -> uuid.UUID:
        return uuid.uuid4()


class SeededIdGen:
    """Deterministic UUIDs from a seed (tests and simulation)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)
