"""Every error spate's public API raises, each defined once.

One root, :class:`SpateError`. Below it:

* :class:`UsageError` — the caller asked for something invalid (an unknown name, a read before
  the since, a row of the wrong type). Never retried; the failed call changed nothing. Narrow
  subclasses mix in the matching built-in, the way ibis does: ``CollectionMissing`` is also a
  ``KeyError``, ``SchemaMismatch`` also a ``TypeError``, so ``except KeyError`` works too.
* :class:`LocationError` — an external system (blob store, consensus, network) failed.
  :class:`Determinate` means the operation certainly did not happen; :class:`Indeterminate`
  means it may or may not have. Only an operation carrying an idempotency token may be retried
  after an ``Indeterminate``.
* :class:`ProtocolError` — a peer sent something that is not a valid message in this state.
* :class:`InvariantViolation` — spate's own bug, detected.

Every message names the object and the frontiers involved. Expected outcomes (a
compare-and-append that lost the race) are returned values, not errors. Internal layers keep a
few narrow errors of their own (persist's, the protocol's); they subclass these roots.

Example::

    import spate
    from spate.errors import ReadBeforeSince, UnknownName

    try:
        env.select("bids", as_of=0)
    except ReadBeforeSince as e:
        print(e.since)          # the times before it were compacted away
    except UnknownName:
        ...
"""

from __future__ import annotations

from spate.errors._controller import (
    CollectionMissing,
    ControllerError,
    DataflowSinceViolation,
    EmptyAsOfForSubscribe,
    HydrationCheckBadTarget,
    InstanceExists,
    InstanceMissing,
    InstanceNotEmpty,
    InstanceShutDown,
    InvalidPeek,
    MissingAsOf,
    PeekExists,
    PeekSinceViolation,
    PeekTargetInvalid,
    ReadBeforeSince,
    ReplicaExists,
    ReplicaMissing,
    SinceViolation,
    UpdateBeyondUpper,
    UpdateNotBeyondLower,
    WriteOnlyCollection,
)
from spate.errors._environment import (
    CallTimeout,
    CatalogError,
    CheckViolation,
    ConnectionInUse,
    ConstraintViolation,
    EnvironmentClosed,
    HasDependents,
    InputMissing,
    InvalidConnection,
    InvalidName,
    InvalidObject,
    InvalidReadArgument,
    NameExists,
    NotNullViolation,
    NotReadable,
    QueryCanceled,
    ReadFailed,
    ReadTimeout,
    RowsNotFound,
    SinkError,
    SinkFenced,
    SourceError,
    SourceUnavailable,
    TransactionClosed,
    UniqueViolation,
    UnknownName,
)
from spate.errors._evaluation import (
    OUT_OF_MEMORY,
    EvaluationFailed,
    OutOfMemory,
    Problem,
    describe_error,
    error_record,
    is_sqlstate,
    record_sqlstate,
    reported,
)
from spate.errors._plan import (
    EvalError,
    InvalidDataflow,
    InvalidFinishing,
    InvalidPlan,
    PlanColumnMissing,
    PlanTypeError,
)
from spate.errors._roots import (
    ColumnMissing,
    Determinate,
    FrontierError,
    FrontierRegression,
    Indeterminate,
    InvalidArgument,
    InvalidArgumentValue,
    InvalidId,
    InvalidReadPolicy,
    InvalidRelationDesc,
    InvalidScalarType,
    InvariantViolation,
    LocationError,
    NegativeCount,
    ProtocolError,
    ReadHoldDowngradeError,
    ReadHoldMismatch,
    SchemaMismatch,
    SpateError,
    UsageError,
    check_argument,
)

__all__ = [
    "OUT_OF_MEMORY",
    "CallTimeout",
    "CatalogError",
    "CheckViolation",
    "CollectionMissing",
    "ColumnMissing",
    "ConnectionInUse",
    "ConstraintViolation",
    "ControllerError",
    "DataflowSinceViolation",
    "Determinate",
    "EmptyAsOfForSubscribe",
    "EnvironmentClosed",
    "EvalError",
    "EvaluationFailed",
    "FrontierError",
    "FrontierRegression",
    "HasDependents",
    "HydrationCheckBadTarget",
    "Indeterminate",
    "InputMissing",
    "InstanceExists",
    "InstanceMissing",
    "InstanceNotEmpty",
    "InstanceShutDown",
    "InvalidArgument",
    "InvalidArgumentValue",
    "InvalidConnection",
    "InvalidDataflow",
    "InvalidFinishing",
    "InvalidId",
    "InvalidName",
    "InvalidObject",
    "InvalidPeek",
    "InvalidPlan",
    "InvalidReadArgument",
    "InvalidReadPolicy",
    "InvalidRelationDesc",
    "InvalidScalarType",
    "InvariantViolation",
    "LocationError",
    "MissingAsOf",
    "NameExists",
    "NegativeCount",
    "NotNullViolation",
    "NotReadable",
    "OutOfMemory",
    "PeekExists",
    "PeekSinceViolation",
    "PeekTargetInvalid",
    "PlanColumnMissing",
    "PlanTypeError",
    "Problem",
    "ProtocolError",
    "QueryCanceled",
    "ReadBeforeSince",
    "ReadFailed",
    "ReadHoldDowngradeError",
    "ReadHoldMismatch",
    "ReadTimeout",
    "ReplicaExists",
    "ReplicaMissing",
    "RowsNotFound",
    "SchemaMismatch",
    "SinceViolation",
    "SinkError",
    "SinkFenced",
    "SourceError",
    "SourceUnavailable",
    "SpateError",
    "TransactionClosed",
    "UniqueViolation",
    "UnknownName",
    "UpdateBeyondUpper",
    "UpdateNotBeyondLower",
    "UsageError",
    "WriteOnlyCollection",
    "check_argument",
    "describe_error",
    "error_record",
    "is_sqlstate",
    "record_sqlstate",
    "reported",
]
