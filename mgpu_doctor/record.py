"""`record`: the package's data types, declared as dataclasses are, built without per-class code.

`@dataclass(frozen=True)` writes the source of six methods for each class (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``), compiles it with
``exec`` and checks every field's annotation for ``ClassVar``/``InitVar``/``KW_ONLY``: about
0.9 ms a class on this project's 2-core machine, and importing ``dataclasses`` imports
``inspect`` (``ast``, ``dis``, ``tokenize``: 5 ms). ``check --quick`` defines about 110 data
types, so that was half of its run (issue 38; benchmarks/quick_check_bench.py).

A record is declared as a dataclass is, with this module's ``field(...)`` (the same arguments),
and read with this module's :func:`fields`, :func:`replace`, :func:`asdict` and :func:`is_record`
(the standard library's versions do not know records); type checkers see a dataclass
(``dataclass_transform``: frozen unless ``@record(frozen=False)``). Its methods are one function
each, here, which reads the class's fields the first time an instance is made and keeps what it
read on the class. They behave as the generated ones do: positional and keyword arguments,
defaults and ``default_factory``, ``init=False``, ``kw_only``, ``__post_init__``; the
``repr``/``compare``/``hash`` of a field honoured; on a frozen record assignment and deletion raise
``FrozenInstanceError``, a mutable one has no hash (as ``dataclass()`` leaves it); a method the
class defines itself is kept. A record takes no ``ClassVar``, ``InitVar`` or ``KW_ONLY``
(refused), and has no ``order=True``. Construction costs about a microsecond more than a
generated ``__init__``: the bundled matrix is read through a compiled index, so no command builds
more than a few thousand records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_kwargs: object) -> Callable[[Any], Any]:
        return lambda decorated: decorated

T = TypeVar("T")
C = TypeVar("C", bound=type)


class _Missing:
    """No default given (``MISSING``)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class FrozenInstanceError(AttributeError):
    """An assignment to, or a deletion of, a field of a frozen record."""


class Field:
    """One field of a record: its name and type (filled in by :func:`record`) and what
    :func:`field` said of it."""

    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare",
                 "metadata", "kw_only")

    def __init__(self, default: Any, default_factory: Any, init: bool, repr: bool,  # noqa: A002
                 hash: bool | None, compare: bool, metadata: Mapping[Any, Any] | None,  # noqa: A002
                 kw_only: bool) -> None:
        self.name = ""
        self.type: Any = None
        self.default, self.default_factory = default, default_factory
        self.init, self.repr, self.hash, self.compare = init, repr, hash, compare
        self.metadata = dict(metadata or {})
        self.kw_only = kw_only

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r}, init={self.init})"


@overload
def field(*, default: T, init: bool = ..., repr: bool = ..., hash: bool | None = ...,  # noqa: A002
          compare: bool = ..., metadata: Mapping[Any, Any] | None = ..., kw_only: bool = ...) -> T: ...
@overload
def field(*, default_factory: Callable[[], T], init: bool = ..., repr: bool = ...,  # noqa: A002
          hash: bool | None = ..., compare: bool = ..., metadata: Mapping[Any, Any] | None = ...,
          kw_only: bool = ...) -> T: ...
@overload
def field(*, init: bool = ..., repr: bool = ..., hash: bool | None = ...,  # noqa: A002
          compare: bool = ..., metadata: Mapping[Any, Any] | None = ..., kw_only: bool = ...) -> Any: ...
def field(*, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True,  # noqa: A002
          repr: bool = True, hash: bool | None = None, compare: bool = True,  # noqa: A002
          metadata: Mapping[Any, Any] | None = None, kw_only: bool = False) -> Any:
    """What ``dataclasses.field`` says of a field, for a record."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, init, repr, hash, compare, metadata, kw_only)


_FIELDS = "__record_fields__"
_PLAN = "__record_plan__"


def is_record(value: object) -> bool:
    """Whether ``value`` is a record or a record's class."""
    return hasattr(value, _FIELDS)


def fields(class_or_instance: Any) -> tuple[Field, ...]:
    """The fields of a record (or its class), in order."""
    try:
        return tuple(getattr(class_or_instance, _FIELDS).values())
    except AttributeError:
        raise TypeError("must be called with a record type or instance") from None


def replace(obj: T, /, **changes: Any) -> T:
    """A new record like ``obj`` with ``changes`` (the fields ``__init__`` takes), as
    ``dataclasses.replace`` makes it: ``__init__`` and ``__post_init__`` run again."""
    for f in fields(obj):
        if not f.init:
            if f.name in changes:
                raise ValueError(f"field {f.name} is declared with init=False, it cannot be "
                                 "specified with replace()")
        elif f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def asdict(obj: Any) -> dict[str, Any]:
    """A record as a dict of its fields, records, lists, tuples and dicts inside it converted too."""
    if not is_record(obj) or isinstance(obj, type):
        raise TypeError("asdict() should be called on record instances")
    return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}


def _plain(value: Any) -> Any:
    if is_record(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


class _Plan:
    """What the shared methods need of one record class, read once from its fields."""

    __slots__ = ("name", "positional", "accepted", "assigned", "compared", "hashed", "shown",
                 "post_init")

    def __init__(self, cls: type) -> None:
        declared = fields(cls)
        self.name = cls.__qualname__
        self.positional = tuple(f.name for f in declared if f.init and not f.kw_only)
        self.accepted = frozenset(f.name for f in declared if f.init)
        # (name, takes an argument, default, factory), in field order, as __init__ assigns them
        self.assigned = tuple((f.name, f.init, f.default, f.default_factory) for f in declared
                              if f.init or f.default_factory is not MISSING)
        self.compared = tuple(f.name for f in declared if f.compare)
        self.hashed = tuple(f.name for f in declared if (f.compare if f.hash is None else f.hash))
        self.shown = tuple(f.name for f in declared if f.repr)
        self.post_init = hasattr(cls, "__post_init__")


def _plan(cls: type) -> _Plan:
    plan = cls.__dict__.get(_PLAN)
    if plan is None:
        plan = _Plan(cls)
        setattr(cls, _PLAN, plan)
    return plan


def _init(self: object, *args: object, **kwargs: object) -> None:
    plan = _plan(type(self))
    if len(args) > len(plan.positional):
        raise TypeError(f"{plan.name}.__init__() takes {len(plan.positional) + 1} positional "
                        f"arguments but {len(args) + 1} were given")
    given = dict(zip(plan.positional, args, strict=False))
    for name, value in kwargs.items():
        if name not in plan.accepted:
            raise TypeError(f"{plan.name}.__init__() got an unexpected keyword argument {name!r}")
        if name in given:
            raise TypeError(f"{plan.name}.__init__() got multiple values for argument {name!r}")
        given[name] = value
    assign = object.__setattr__
    for name, takes_argument, default, factory in plan.assigned:
        if takes_argument and name in given:
            assign(self, name, given[name])
        elif factory is not MISSING:
            assign(self, name, factory())
        elif default is not MISSING:
            assign(self, name, default)
        else:
            raise TypeError(f"{plan.name}.__init__() missing 1 required argument: {name!r}")
    if plan.post_init:
        self.__post_init__()  # type: ignore[attr-defined]


def _repr(self: object) -> str:
    plan = _plan(type(self))
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in plan.shown)
    return f"{plan.name}({shown})"


def _eq(self: object, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    for name in _plan(type(self)).compared:
        mine, theirs = getattr(self, name), getattr(other, name)
        if mine is not theirs and mine != theirs:
            return False
    return True


def _hash(self: object) -> int:
    return hash(tuple(getattr(self, name) for name in _plan(type(self)).hashed))


def _setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


_SHARED: dict[str, Callable[..., Any]] = {"__init__": _init, "__repr__": _repr, "__eq__": _eq}
_FROZEN: dict[str, Callable[..., Any]] = {"__setattr__": _setattr, "__delattr__": _delattr}


@overload
def record(cls: C, /) -> C: ...
@overload
def record(*, frozen: bool = ...) -> Callable[[C], C]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def record(cls: Any = None, /, *, frozen: bool = True) -> Any:
    """``@dataclass(frozen=True)`` (``@record(frozen=False)``: ``@dataclass``) without per-class
    generated code (see the module)."""
    if cls is None:
        return lambda declared: _build(declared, frozen)
    return _build(cls, frozen)


def _build(cls: C, frozen: bool) -> C:
    own = cls.__dict__
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    _read_fields(cls)
    for name, method in (_SHARED | _FROZEN).items() if frozen else _SHARED.items():
        if name not in own:
            setattr(cls, name, method)
        elif name in _FROZEN:
            raise TypeError(f"{cls.__qualname__} defines {name}: a frozen record cannot")
    if not explicit_hash:  # dataclass(): frozen and compared, a hash of the fields; mutable, none
        setattr(cls, "__hash__", _hash if frozen else None)  # noqa: B010
    return cls


_NOT_FIELDS = ("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar", "KW_ONLY",
               "dataclasses.KW_ONLY")


def _read_fields(cls: type) -> None:
    """The class's fields, after its bases' (a field declared again keeps its place), as
    ``dataclass()`` reads them; defaults stay on the class as class attributes."""
    found: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        found.update(base.__dict__.get(_FIELDS, {}))
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if text.startswith(_NOT_FIELDS):
            raise TypeError(f"{cls.__qualname__}.{name}: a record takes no ClassVar, InitVar or KW_ONLY")
        given = cls.__dict__.get(name, MISSING)
        spec = given if isinstance(given, Field) else field(default=given)
        if spec.default.__class__.__hash__ is None:  # dataclass()'s rule for a mutable default
            raise ValueError(f"{cls.__qualname__}.{name}: a mutable default; use default_factory")
        spec.name, spec.type = name, annotation
        if isinstance(given, Field):  # the class keeps the default itself, as dataclass() does
            if spec.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, spec.default)
        found[name] = spec
    positional = [f for f in found.values() if f.init and not f.kw_only]
    for before, after in zip(positional, positional[1:], strict=False):
        if _has_default(before) and not _has_default(after):
            raise TypeError(f"{cls.__qualname__}: non-default argument {after.name!r} follows "
                            "default argument")
    setattr(cls, _FIELDS, found)
    if "__match_args__" not in cls.__dict__:
        setattr(cls, "__match_args__", tuple(f.name for f in positional))  # noqa: B010


def _has_default(spec: Field) -> bool:
    return spec.default is not MISSING or spec.default_factory is not MISSING
