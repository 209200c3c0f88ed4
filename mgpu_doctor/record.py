"""`record`: a frozen dataclass whose methods are shared by every record, not compiled per class.

`@dataclass(frozen=True)` writes the source of six methods for each class (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``), compiles it with
``exec`` and checks every field's annotation for ``ClassVar``/``InitVar``/``KW_ONLY``: about
0.9 ms a class on this project's 2-core machine. ``check --quick`` defines about 110 data types,
so that alone was half of its run (issue 38; benchmarks/quick_check_bench.py).

A record is still a dataclass to everything that reads one: ``dataclasses.fields``, ``replace``,
``asdict``, ``is_dataclass`` and ``__match_args__`` work as before, fields are declared with
``dataclasses.field(...)``, and type checkers see ``@dataclass(frozen=True)``. Its fields are read
here (:func:`_read_fields`), as ``dataclass()`` records them, and its methods are one function
each, here, which reads the class's fields the first time an instance is made and keeps what it
read on the class. They behave as the generated ones do: positional and keyword arguments,
defaults and ``default_factory``, ``init=False``, ``kw_only``, ``__post_init__``; the
``repr``/``compare``/``hash`` of a field honoured; assignment and deletion raise
``FrozenInstanceError``; a method the class defines itself is kept. A record takes no
``ClassVar``, ``InitVar`` or ``KW_ONLY`` (refused), has no ``order=True``, and a standard
dataclass does not subclass it. Construction costs about a microsecond more than a generated
``__init__``: the bundled matrix is read through a compiled index, so no command builds more
than a few thousand records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

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
    own = cls.__dict__
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if _FIELD is None:  # a Python whose dataclasses keep their fields otherwise: let it read them
        if not own.get("__doc__"):
            cls.__doc__ = cls.__qualname__  # else dataclass() computes a signature for it
        dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    else:
        _read_fields(cls)
    for name, method in _SHARED.items():
        if name not in own:
            setattr(cls, name, method)
        elif name in ("__setattr__", "__delattr__"):
            raise TypeError(f"{cls.__qualname__} defines {name}: a record is frozen")
    if not explicit_hash:
        cls.__hash__ = _hash  # type: ignore[method-assign]
    return cls


# What dataclasses.fields(), replace() and asdict() read a field's kind from (private, the same from
# Python 3.7 to 3.14); a Python without it gets its fields read by dataclass() itself.
_FIELD = getattr(dataclasses, "_FIELD", None)
_NOT_FIELDS = ("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar", "KW_ONLY",
               "dataclasses.KW_ONLY")


def _read_fields(cls: type) -> None:
    """What ``dataclass()`` records of a class's fields, read without the checks of each annotation
    it makes for ``ClassVar``, ``InitVar`` and ``KW_ONLY`` (a record has none: refused here)."""
    fields: dict[str, dataclasses.Field[Any]] = {}
    for base in reversed(cls.__mro__[1:]):
        fields.update(base.__dict__.get("__dataclass_fields__", {}))
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if text.startswith(_NOT_FIELDS) or isinstance(annotation, dataclasses.InitVar):
            raise TypeError(f"{cls.__qualname__}.{name}: a record takes no ClassVar, InitVar or KW_ONLY")
        given = cls.__dict__.get(name, dataclasses.MISSING)
        spec: dataclasses.Field[Any] = given if isinstance(given, dataclasses.Field) else \
            cast("dataclasses.Field[Any]", dataclasses.field(default=given))
        if spec.default.__class__.__hash__ is None:  # dataclass()'s rule for a mutable default
            raise ValueError(f"{cls.__qualname__}.{name}: a mutable default; use default_factory")
        spec.name, spec.type = name, annotation
        setattr(spec, "_field_type", _FIELD)  # noqa: B010 - private to dataclasses: not typed
        if spec.kw_only is dataclasses.MISSING:
            spec.kw_only = False
        if isinstance(given, dataclasses.Field):  # the class keeps the default itself, as dataclass() does
            if spec.default is dataclasses.MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, spec.default)
        fields[name] = spec
    positional = [f for f in fields.values() if f.init and not f.kw_only]
    for before, after in zip(positional, positional[1:], strict=False):
        if _has_default(before) and not _has_default(after):
            raise TypeError(f"{cls.__qualname__}: non-default argument {after.name!r} follows "
                            "default argument")
    setattr(cls, "__dataclass_fields__", fields)  # noqa: B010 - set as dataclass() sets them
    if "__match_args__" not in cls.__dict__:
        setattr(cls, "__match_args__", tuple(f.name for f in positional))  # noqa: B010


def _has_default(spec: dataclasses.Field[Any]) -> bool:
    return spec.default is not dataclasses.MISSING or spec.default_factory is not dataclasses.MISSING
