"""`record` behaves as `@dataclass(frozen=True)` does, without compiling code per class.

Each behaviour is checked on a pair of classes with one body: one made by the standard library,
one by `record`; the two must agree (results, errors, and what `dataclasses`' functions read of
the one, the record module's read of the other)."""

from __future__ import annotations

import builtins
import copy
import dataclasses
import pickle
from dataclasses import dataclass

import pytest

from mgpu_doctor import record as records
from mgpu_doctor.record import FrozenInstanceError, record


def _body(field=dataclasses.field) -> dict[str, object]:
    return {
        "__annotations__": {"name": "str", "count": "int", "tags": "tuple[str, ...]",
                            "hidden": "str", "note": "str", "derived": "int", "flag": "bool"},
        "count": 1,
        "tags": field(default_factory=tuple),
        "hidden": field(default="h", repr=False, compare=False),
        "note": field(default="", hash=False),
        "derived": field(init=False, default=0),
        "flag": field(default=False, kw_only=True),
    }


def _pair(extra: dict[str, object] | None = None) -> tuple[type, type]:
    standard = dataclass(frozen=True)(type("Sample", (), {**_body(), **(extra or {})}))
    mine = record(type("Sample", (), {**_body(records.field), **(extra or {})}))
    return standard, mine


STANDARD, RECORD = _pair()
CALLS = [
    ((), {"name": "a"}),
    (("a",), {}),
    (("a", 2, ("x",)), {"flag": True}),
    (("a",), {"count": 3, "hidden": "other", "note": "n"}),
]
BAD_CALLS = [
    ((), {}),                               # missing name
    (("a", 1, (), "h", "n", "extra"), {}),   # too many positional (flag is keyword-only)
    (("a",), {"name": "b"}),                 # twice
    (("a",), {"derived": 3}),                # init=False
    (("a",), {"nope": 1}),
]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_construction_fields_repr_and_replace_agree(args, kwargs):
    standard, mine = STANDARD(*args, **kwargs), RECORD(*args, **kwargs)
    assert repr(mine) == repr(standard)
    assert records.asdict(mine) == dataclasses.asdict(standard)
    assert [f.name for f in records.fields(mine)] == [f.name for f in dataclasses.fields(standard)]
    assert RECORD.__match_args__ == STANDARD.__match_args__
    assert records.is_record(mine) and records.is_record(RECORD) and not records.is_record(standard)
    changed = records.replace(mine, count=9)
    assert changed.count == 9 and changed.name == mine.name and type(changed) is RECORD


@pytest.mark.parametrize(("args", "kwargs"), BAD_CALLS)
def test_the_same_calls_are_refused(args, kwargs):
    with pytest.raises(TypeError):
        STANDARD(*args, **kwargs)
    with pytest.raises(TypeError):
        RECORD(*args, **kwargs)


def test_equality_and_hash_follow_compare_and_hash():
    for cls in (STANDARD, RECORD):
        one, same_but_hidden, other = cls("a"), cls("a", hidden="x"), cls("b")
        assert one == same_but_hidden and hash(one) == hash(same_but_hidden)  # compare=False
        assert one != other
        assert cls("a", note="x") != one  # hash=False still compares
        assert (one == 1) is False and one.__eq__(1) is NotImplemented
    assert STANDARD("a", note="x") != RECORD("a", note="x")  # another class
    assert hash(RECORD("a", note="x")) == hash(RECORD("a", note="y"))  # note is not hashed


def test_frozen():
    mine = RECORD("a")
    with pytest.raises(FrozenInstanceError):
        mine.name = "b"  # type: ignore[attr-defined]
    with pytest.raises(FrozenInstanceError):
        del mine.name  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        STANDARD("a").name = "b"  # type: ignore[misc]
    assert issubclass(FrozenInstanceError, AttributeError)  # caught where the standard one was


def test_defaults_are_not_shared_and_init_false_reads_the_class_default():
    one, two = RECORD("a"), RECORD("b")
    assert one.tags == () and one.derived == 0 and "derived" not in vars(one)
    listed = record(type("Listed", (), {"__annotations__": {"items": "list[int]"},
                                        "items": records.field(default_factory=list)}))
    assert listed().items is not listed().items
    assert two.flag is False


def test_post_init_runs_and_may_set_a_field():
    def post_init(self):
        object.__setattr__(self, "derived", len(self.name))
    standard, mine = _pair({"__post_init__": post_init})
    assert mine("abc").derived == standard("abc").derived == 3


def test_methods_a_class_defines_are_kept_and_eq_without_hash_gets_the_fields_hash():
    def eq(self, other):
        return True
    standard, mine = _pair({"__repr__": lambda self: "mine", "__eq__": eq})
    assert repr(mine("a")) == repr(standard("a")) == "mine"
    assert mine("a") == mine("b")
    assert hash(mine("a")) == hash(mine("a", hidden="z"))
    _, explicit = _pair({"__hash__": lambda self: 7})
    assert hash(explicit("a")) == 7


def test_a_record_refuses_its_own_setattr():
    with pytest.raises(TypeError, match="frozen"):
        record(type("Loose", (), {"__annotations__": {"x": "int"},
                                  "__setattr__": lambda self, name, value: None}))


def test_subclasses_add_fields_after_their_bases():
    base = record(type("Base", (), {"__annotations__": {"a": "int"}}))
    child = record(type("Child", (base,), {"__annotations__": {"b": "int"}, "b": 2}))
    made = child(1)
    assert (made.a, made.b) == (1, 2) and repr(made) == "Child(a=1, b=2)"
    assert made != base(1) and base(1) == base(1)


@record
class Stored:
    """Pickled by name: the matrix index keeps entries pickled."""

    name: str
    tags: tuple[str, ...] = ()
    derived: int = records.field(init=False, default=0)


def test_copy_and_pickle_round_trip():
    mine = Stored("a", ("x",))
    assert copy.deepcopy(mine) == mine
    assert pickle.loads(pickle.dumps(mine)) == mine
    assert pickle.loads(pickle.dumps(mine)).tags == ("x",)


def test_a_record_compiles_no_code(monkeypatch):
    """The reason it exists: a dataclass compiles its methods with exec, a record does not."""
    compiled = []

    def counting_exec(*args, **kwargs):
        compiled.append(args[0])
        return real_exec(*args, **kwargs)

    real_exec = builtins.exec
    monkeypatch.setattr(builtins, "exec", counting_exec)
    record(type("Counted", (), _body(records.field)))
    assert compiled == []
    dataclass(frozen=True)(type("Compiled", (), _body()))
    assert compiled  # the test can see what it counts


def test_a_mutable_record_is_a_plain_dataclass():
    standard = dataclass(type("Loose", (), {"__annotations__": {"a": "int", "b": "list[int]"},
                                             "b": dataclasses.field(default_factory=list)}))
    mine = record(frozen=False)(type("Loose", (), {"__annotations__": {"a": "int", "b": "list[int]"},
                                                    "b": records.field(default_factory=list)}))
    one, other = standard(1), mine(1)
    one.a, other.a = 2, 2
    assert repr(one) == repr(other) and one.b is not standard(1).b and other.b is not mine(1).b
    assert other == mine(2) and other != mine(3)
    assert standard.__hash__ is None and mine.__hash__ is None  # compared and mutable: no hash
    assert records.replace(other, a=5).a == 5


def test_the_record_module_reads_what_dataclasses_reads():
    assert repr(records.MISSING) == "MISSING"
    with pytest.raises(ValueError):
        records.field(default=1, default_factory=int)
    with pytest.raises(TypeError):
        records.fields(STANDARD("a"))  # a standard dataclass is not a record
    with pytest.raises(ValueError, match="init=False"):
        records.replace(RECORD("a"), derived=3)
    nested = Stored("a", ("x",))
    assert records.asdict(RECORD("a", 2, (nested,))) ["tags"] == ({"name": "a", "tags": ("x",), "derived": 0},)


def test_what_a_record_refuses_as_dataclass_does():
    for body in ({"__annotations__": {"a": "int", "b": "int"}, "a": 1},  # non-default after default
                 {"__annotations__": {"a": "list[int]"}, "a": []}):       # a mutable default
        with pytest.raises((TypeError, ValueError)):
            dataclass(frozen=True)(type("Standard", (), dict(body)))
        with pytest.raises((TypeError, ValueError)):
            record(type("Mine", (), dict(body)))
    with pytest.raises(TypeError, match="ClassVar"):
        record(type("Shared", (), {"__annotations__": {"n": "ClassVar[int]"}, "n": 1}))


def test_a_redeclared_field_keeps_its_place_and_takes_the_new_default():
    def build(decorate):
        base = decorate(type("Base", (), {"__annotations__": {"a": "int", "b": "int"}, "b": 1}))
        return decorate(type("Child", (base,), {"__annotations__": {"a": "int", "c": "int"}, "a": 0, "c": 2}))

    for decorate, fields in ((dataclass(frozen=True), dataclasses.fields), (record, records.fields)):
        child = build(decorate)
        assert [f.name for f in fields(child)] == ["a", "b", "c"]
        assert repr(child()).endswith("(a=0, b=1, c=2)")
        assert child.a == 0 and "field" not in repr(vars(child).get("c"))
