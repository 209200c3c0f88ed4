"""A strict JSON round trip for the frozen dataclasses of snapshots, reports and results.

Decoding is driven by the type hints, so a saved file that does not fit the schema is
rejected with the path of the offending field (``snapshot.nvml.gpus[3].memory_total``),
never half-loaded.
"""

from __future__ import annotations

import enum
import sys
import types
import typing
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import MISSING, fields, is_record

T = TypeVar("T")


class SchemaError(ValueError):
    """A document does not fit the expected schema; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message



def lazy_types(module: str, types_by_module: dict[str, str]) -> typing.Callable[[str], Any]:
    """A module's ``__getattr__`` (PEP 562) that imports each named type from its module on first
    use: a type only decoding needs is not imported on every run, and decoding still finds it."""
    import importlib

    def module_getattr(name: str) -> Any:
        if name in types_by_module:
            return getattr(importlib.import_module(types_by_module[name]), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return module_getattr

def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums, tuples and dicts to plain JSON types. A dataclass field made from the
    others (``init=False``) is left out: building the object again makes it."""
    if isinstance(value, Unavailable):
        data = {"unavailable": value.reason, "detail": value.detail}
        if value.cause:
            data["cause"] = value.cause
        return data
    if is_record(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in fields(value) if f.init}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def from_jsonable(cls: type[T], data: Any, path: str = "$") -> T:
    """Build ``cls`` from plain JSON data, checking every field against its type hint."""
    return typing.cast(T, _decode(cls, data, path))


_hints_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _hints_cache:
        module = sys.modules.get(cls.__module__)
        names = _ModuleNames(module) if module is not None and "__getattr__" in vars(module) else None
        _hints_cache[cls] = get_type_hints(cls, localns=names)
    return _hints_cache[cls]


class _ModuleNames(dict[str, Any]):
    """A module's names for evaluating hints, with those its ``__getattr__`` (PEP 562) imports on
    first use: a module can keep types that only decoding needs out of every run's imports."""

    def __init__(self, module: types.ModuleType) -> None:
        super().__init__()
        self.module = module

    def __missing__(self, name: str) -> Any:
        try:
            return getattr(self.module, name)
        except AttributeError:
            raise KeyError(name) from None


def _decode(tp: Any, data: Any, path: str) -> Any:
    if tp is Any:
        return data
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return _decode_union(get_args(tp), data, path)
    if origin is typing.Literal:
        if data not in get_args(tp):
            raise SchemaError(path, f"expected one of {list(get_args(tp))}, got {data!r}")
        return data
    if origin in (list, tuple):
        if not isinstance(data, list):
            raise SchemaError(path, f"expected a list, got {_kind(data)}")
        args = get_args(tp)
        item = args[0] if args else Any
        items = [_decode(item, v, f"{path}[{i}]") for i, v in enumerate(data)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(data, dict):
            raise SchemaError(path, f"expected an object, got {_kind(data)}")
        _, val_tp = get_args(tp) or (str, Any)
        return {str(k): _decode(val_tp, v, f"{path}.{k}") for k, v in data.items()}
    if tp is Unavailable:
        return _decode_unavailable(data, path)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            allowed = [m.value for m in tp]
            raise SchemaError(path, f"expected one of {allowed}, got {data!r}") from None
    if isinstance(tp, type) and is_record(tp):
        return _decode_dataclass(tp, data, path)
    return _decode_scalar(tp, data, path)


def _decode_union(args: tuple[Any, ...], data: Any, path: str) -> Any:
    if data is None and type(None) in args:
        return None
    if isinstance(data, dict) and "unavailable" in data and Unavailable in args:
        return _decode_unavailable(data, path)
    errors = []
    for arg in args:
        if arg is type(None) or arg is Unavailable:
            continue
        try:
            return _decode(arg, data, path)
        except SchemaError as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    names = " or ".join(getattr(a, "__name__", str(a)) for a in args)
    raise SchemaError(path, f"expected {names}, got {_kind(data)}")


def _decode_unavailable(data: Any, path: str) -> Unavailable:
    if not isinstance(data, dict) or "unavailable" not in data:
        raise SchemaError(path, f"expected an 'unavailable' object, got {_kind(data)}")
    reason = data["unavailable"]
    if reason not in ("absent", "failed", "skipped"):
        raise SchemaError(f"{path}.unavailable", f"unknown reason {reason!r}")
    detail = data.get("detail", "")
    cause = data.get("cause", "")
    if not isinstance(detail, str) or not isinstance(cause, str):
        raise SchemaError(path, "'detail' and 'cause' must be strings")
    return Unavailable(reason, detail, cause)


def _decode_dataclass(cls: type, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise SchemaError(path, f"expected an object for {cls.__name__}, got {_kind(data)}")
    hints = _hints(cls)
    kwargs = {}
    for field in fields(cls):
        if field.name in data:
            kwargs[field.name] = _decode(hints[field.name], data[field.name], f"{path}.{field.name}")
        elif (
            field.default is MISSING
            and field.default_factory is MISSING
        ):
            raise SchemaError(f"{path}.{field.name}", "missing")
    return cls(**kwargs)


def _decode_scalar(tp: Any, data: Any, path: str) -> Any:
    if tp is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    if tp is type(None):
        if data is not None:
            raise SchemaError(path, f"expected null, got {_kind(data)}")
        return None
    if not isinstance(tp, type):
        raise SchemaError(path, f"unsupported type {tp!r}")
    if isinstance(data, bool) and tp is not bool:
        raise SchemaError(path, f"expected {tp.__name__}, got a boolean")
    if not isinstance(data, tp):
        raise SchemaError(path, f"expected {tp.__name__}, got {_kind(data)}")
    return data


def _kind(data: Any) -> str:
    if data is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(data), type(data).__name__
    )
