"""Read policies: how a collection's implied read capability follows its write frontier.

``policy.frontier(upper)`` is the since a policy *asks for* given the write frontier ``upper``.
The controllers apply it only when it does not regress the implied capability.

* ``NoPolicy(initial_since)`` — always ``initial_since``.
* ``ValidFrom(frontier)`` — always ``frontier``; ``ValidFrom({})`` releases everything (drop).
* ``LagWritesBy(lag, max_granularity)`` — for ``upper = {u}``: ``t = u - lag`` (saturating),
  then rounded down to a multiple of ``min(lag, max_granularity)`` when ``lag > 0``; for
  ``upper = {}`` it asks for ``{0}`` (never advancing a capability). ``lag = 0`` is the identity.
* ``StepBack()`` — ``{u}`` gives ``{u - 1}`` (saturating); ``{}`` gives ``{0}``. Storage exports.
* ``Multiple(policies)`` — the meet (minimum) of its members: the least permissive wins.

Every policy is monotone in the write frontier: ``u1 <= u2`` implies
``frontier(u1) <= frontier(u2)`` (a property test checks it), except ``{}`` which maps to
``{0}`` and is never applied as a regression.
"""

from __future__ import annotations

from dataclasses import dataclass

from spate.errors import InvalidReadPolicy
from spate.frontier.antichain import TIMESTAMP_MIN, Antichain, Frontier
from spate.wire import wire


class ReadPolicy:
    """Base class of the read policies. Immutable values, comparable and serialisable."""

    __slots__ = ()

    def frontier(self, write_frontier: Frontier) -> Frontier:
        raise NotImplementedError

    # Constructors read better at call sites: ReadPolicy.lag_writes_by(1000, 1000).
    @staticmethod
    def no_policy(initial_since: Frontier) -> NoPolicy:
        return NoPolicy(initial_since)

    @staticmethod
    def valid_from(since: Frontier) -> ValidFrom:
        return ValidFrom(since)

    @staticmethod
    def lag_writes_by(lag: int, max_granularity: int) -> LagWritesBy:
        return LagWritesBy(lag, max_granularity)

    @staticmethod
    def step_back() -> StepBack:
        return StepBack()

    @staticmethod
    def multiple(policies: tuple[ReadPolicy, ...] | list[ReadPolicy]) -> Multiple:
        return Multiple(tuple(policies))


@wire("read_policy.no_policy")
@dataclass(frozen=True, slots=True)
class NoPolicy(ReadPolicy):
    """Always ``initial_since``: the default before anybody sets a policy."""

    initial_since: Frontier

    def frontier(self, write_frontier: Frontier) -> Frontier:
        return self.initial_since

    def __str__(self) -> str:
        return f"NoPolicy(initial_since={self.initial_since})"


@wire("read_policy.valid_from")
@dataclass(frozen=True, slots=True)
class ValidFrom(ReadPolicy):
    """Always the given frontier (manual piloting; ``ValidFrom({})`` drops)."""

    since: Frontier

    def frontier(self, write_frontier: Frontier) -> Frontier:
        return self.since

    def __str__(self) -> str:
        return f"ValidFrom({self.since})"


@wire("read_policy.lag_writes_by")
@dataclass(frozen=True, slots=True)
class LagWritesBy(ReadPolicy):
    """Trail the write frontier by ``lag`` ms, in steps of ``min(lag, max_granularity)`` ms."""

    lag: int
    max_granularity: int

    def __post_init__(self) -> None:
        if isinstance(self.lag, bool) or not isinstance(self.lag, int) or self.lag < 0:
            raise InvalidReadPolicy(f"lag_writes_by: lag must be an int >= 0, got {self.lag!r}")
        if (
            isinstance(self.max_granularity, bool)
            or not isinstance(self.max_granularity, int)
            or self.max_granularity < 1
        ):
            raise InvalidReadPolicy(
                f"lag_writes_by: max_granularity must be an int >= 1, got {self.max_granularity!r}"
            )

    def frontier(self, write_frontier: Frontier) -> Frontier:
        upper = write_frontier.as_option()
        if upper is None:
            return Antichain.minimum()
        t = upper - self.lag if upper > self.lag else TIMESTAMP_MIN
        if self.lag > 0:
            granularity = min(self.lag, self.max_granularity)
            t -= t % granularity
        return Antichain.of(t)

    def __str__(self) -> str:
        return f"LagWritesBy(lag={self.lag}, max_granularity={self.max_granularity})"


@wire("read_policy.step_back")
@dataclass(frozen=True, slots=True)
class StepBack(ReadPolicy):
    """One tick behind the write frontier: readable at the latest complete time."""

    def frontier(self, write_frontier: Frontier) -> Frontier:
        if write_frontier.is_empty():
            return Antichain.minimum()
        return write_frontier.step_back()

    def __str__(self) -> str:
        return "StepBack()"


@wire("read_policy.multiple")
@dataclass(frozen=True, slots=True)
class Multiple(ReadPolicy):
    """The meet of several policies: the least permissive one decides."""

    policies: tuple[ReadPolicy, ...]

    def __post_init__(self) -> None:
        if not self.policies:
            raise InvalidReadPolicy("Multiple needs at least one policy")
        for p in self.policies:
            if not isinstance(p, ReadPolicy):
                raise InvalidReadPolicy(f"Multiple: not a read policy: {p!r}")

    def frontier(self, write_frontier: Frontier) -> Frontier:
        result: Frontier = Antichain.empty()
        for p in self.policies:
            result = result.meet(p.frontier(write_frontier))
        return result

    def __str__(self) -> str:
        return "Multiple(" + ", ".join(str(p) for p in self.policies) + ")"
