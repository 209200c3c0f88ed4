"""`record` behaves as `@dataclass(frozen=True)` does, without compiling code per class.

Each behaviour is checked on a pair of classes with one body: one made by the standard library,
one by `record`; the two must agree (results, errors, what `dataclasses` reads of them)."""

from __future__ import annotations

import builtins
import copy
import dataclasses
import pickle
from dataclasses import FrozenInstanceError, dataclass, field

import pytest

from mgpu_doctor.record import record


def _body() -> dict[str, object]:
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
    made = []
    for decorate in (dataclass(frozen=True), record):
        made.append(decorate(type("Sample", (), {**_body(), **(extra or {})})))
    return made[0], made[1]


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
    assert dataclasses.asdict(mine) == dataclasses.asdict(standard)
    assert [f.name for f in dataclasses.fields(mine)] == [f.name for f in dataclasses.fields(standard)]
    assert RECORD.__match_args__ == STANDARD.__match_args__
    changed = dataclasses.replace(mine, count=9)
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


def test_defaults_are_not_shared_and_init_false_reads_the_class_default():
    one, two = RECORD("a"), RECORD("b")
    assert one.tags == () and one.derived == 0 and "derived" not in vars(one)
    listed = record(type("Listed", (), {"__annotations__": {"items": "list[int]"},
                                        "items": field(default_factory=list)}))
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
    derived: int = field(init=False, default=0)


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
    record(type("Counted", (), _body()))
    assert compiled == []
    dataclass(frozen=True)(type("Compiled", (), _body()))
    assert compiled  # the test can see what it counts


def test_where_dataclasses_keep_fields_otherwise_dataclass_reads_them(monkeypatch):
    """A Python whose dataclasses module lacks the private marker the fields are recorded with:
    dataclass() reads them, and the records behave the same."""
    import mgpu_doctor.record as record_module

    monkeypatch.setattr(record_module, "_FIELD", None)
    standard, mine = _pair()
    for args, kwargs in CALLS:
        one, other = standard(*args, **kwargs), mine(*args, **kwargs)
        assert repr(one) == repr(other) and dataclasses.asdict(one) == dataclasses.asdict(other)
        assert mine(*args, **kwargs) == other and hash(mine(*args, **kwargs)) == hash(other)
        assert dataclasses.replace(other, count=5).count == 5


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

    for decorate in (dataclass(frozen=True), record):
        child = build(decorate)
        assert [f.name for f in dataclasses.fields(child)] == ["a", "b", "c"]
        assert repr(child()).endswith("(a=0, b=1, c=2)")
        assert child.a == 0 and "field" not in repr(vars(child).get("c"))
