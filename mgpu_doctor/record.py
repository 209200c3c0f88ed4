"""`record`: a frozen dataclass whose methods are shared by every record, not compiled per class.

`@dataclass(frozen=True)` writes the source of six methods for each class (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``) and compiles it with
``exec``: 0.7-0.9 ms a class on this project's 2-core machine. ``check --quick`` defines about 110
data types, so that alone was half of its run (issue 38; benchmarks/quick_check_bench.py).

A record is still a dataclass: the standard library reads its fields (``dataclasses.fields``,
``replace``, ``asdict``, ``is_dataclass`` and ``__match_args__`` work as before, ``field(...)``
takes the same arguments), and type checkers see ``@dataclass(frozen=True)``. Only the methods
differ: one function each, here, which reads the class's fields the first time an instance is
made and keeps what it read on the class. They behave as the generated ones do: positional and
keyword arguments, defaults and ``default_factory``, ``init=False``, ``kw_only``,
``__post_init__``; ``repr``/``compare``/``hash`` of a field honoured; assignment and deletion
raise ``FrozenInstanceError``; a method the class defines itself is kept. Not supported, as no
record needs them: ``InitVar`` and ``order=True`` (a class asking for them is refused).
Construction costs about a microsecond more than a generated ``__init__``: the bundled matrix is
read through a compiled index, so no command builds more than a few thousand records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_kwargs: object) -> Callable[[Any], Any]:
        return lambda decorated: decorated

T = TypeVar("T")

_PLAN = "__record_plan__"
_MISSING = dataclasses.MISSING


class _Plan:
    """What the shared methods need of one record class, read once from its fields."""

    __slots__ = ("name", "positional", "accepted", "assigned", "compared", "hashed", "shown",
                 "post_init")

    def __init__(self, cls: type) -> None:
        fields = dataclasses.fields(cls)
        self.name = cls.__qualname__
        self.positional = tuple(f.name for f in fields if f.init and not f.kw_only)
        self.accepted = frozenset(f.name for f in fields if f.init)
        # (name, takes an argument, default, factory), in field order, as __init__ assigns them
        self.assigned = tuple((f.name, f.init, f.default, f.default_factory) for f in fields
                              if f.init or f.default_factory is not _MISSING)
        self.compared = tuple(f.name for f in fields if f.compare)
        self.hashed = tuple(f.name for f in fields
                            if (f.compare if f.hash is None else f.hash))
        self.shown = tuple(f.name for f in fields if f.repr)
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
        elif factory is not _MISSING:
            assign(self, name, factory())
        elif default is not _MISSING:
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
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: object, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


_SHARED: dict[str, Callable[..., Any]] = {
    "__init__": _init, "__repr__": _repr, "__eq__": _eq, "__setattr__": _setattr,
    "__delattr__": _delattr,
}


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True)`` without per-class generated code (see the module)."""
    if any(isinstance(value, dataclasses.InitVar) for value in cls.__dict__.get(
            "__annotations__", {}).values()):
        raise TypeError(f"{cls.__qualname__}: a record takes no InitVar")
    own = cls.__dict__
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if not own.get("__doc__"):
        cls.__doc__ = cls.__qualname__  # else dataclass() computes a signature for it
    dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    for name, method in _SHARED.items():
        if name not in own or (name == "__eq__" and own[name] is None):
            setattr(cls, name, method)
        elif name in ("__setattr__", "__delattr__"):
            raise TypeError(f"{cls.__qualname__} defines {name}: a record is frozen")
    if not explicit_hash:
        cls.__hash__ = _hash  # type: ignore[method-assign]
    return cls
