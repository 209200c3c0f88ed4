"""The compiled known-issue index: the same findings as assessing every entry, and never stale."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mgpu_doctor.environment.matrix_view import environment_from_resolved
from mgpu_doctor.environment.query import resolve_query
from mgpu_doctor.matrix import index as matrix_index
from mgpu_doctor.matrix.compat_tables import bundled_tensorflow_table
from mgpu_doctor.matrix.environment import Environment, environment_from_mapping
from mgpu_doctor.matrix.known_issue_findings import known_issue_findings, older_lines
from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.match import assess
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.process.cache_home import CACHE_ENV

MATRIX = load_matrix(bundled_matrix_dir())
TEAM = Path(__file__).parent / "data" / "matrix-team"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(matrix_index, "_LOADED", {})
    return tmp_path / "cache" / "matrix"


def query_env(*terms: str) -> Environment:
    return environment_from_resolved(resolve_query(list(terms))[0])


def environments(every_example: int = 1) -> list[tuple[str, Environment]]:
    """Every tested build (as a query resolves it, CUDA and Keras predicted), the entries' own
    examples (every one, or every n-th), and queries of the kinds `check` and `matrix query` see."""
    envs = []
    for build in bundled_tensorflow_table().builds:
        python = build.python.replace(",", "-").split("-")[0].strip()
        envs.append((f"build {build.tensorflow}", query_env(f"tensorflow=={build.tensorflow}")))
        envs.append((f"build {build.tensorflow} full", query_env(
            f"tensorflow=={build.tensorflow}", f"python=={python}", f"cuda=={build.cuda}",
            f"cudnn=={build.cudnn}", "gpus=2")))
    examples = [(f"{issue.id} example {i}", example.env) for issue in MATRIX.issues
                for i, example in enumerate(issue.examples)]
    envs += [(name, environment_from_mapping(env)) for name, env in examples[::every_example]]
    for terms in (["keras==3.3.3"], ["keras==3.3.3", "gpus=4"], ["tensorflow==2.16"], ["tensorflow==2.15"],
                  ["tensorflow==2.17.0rc1"], ["tensorflow==2.18.0.dev20240801"], ["tensorflow==2.15.0+cu121"],
                  ["cuda==12", "gpus=8"], ["nccl==2.18.3", "gpus=2"], ["tensorflow==2.13.1", "strategy=mirrored",
                  "usage=mixed_precision"], ["jax==0.4.30", "jaxlib==0.4.30"], ["horovod==0.28.1"], []):
        envs.append((" ".join(terms) or "nothing known", query_env(*terms)))
    return envs


def assert_same_findings(envs: list[tuple[str, Environment]]) -> None:
    index = matrix_index.load_index(bundled_matrix_dir())
    assert index.count == len(MATRIX.issues) > 300
    narrowed = 0
    for name, env in envs:
        assert known_issue_findings(index.candidates(env), env) == known_issue_findings(MATRIX.issues, env), name
        shown, counted = index.split_candidates(env)  # as the check reads them: the counted ones apart
        older = older_lines([assess(i, env) for i in index.counted_entries(counted)])
        assert known_issue_findings(shown, env, older=older) == known_issue_findings(MATRIX.issues, env), name
        narrowed += len(shown) < index.count / 2
    assert narrowed > len(envs) / 2  # the index does narrow: most read a fraction of the entries


def test_the_index_reports_what_assessing_every_entry_reports(cache):
    assert_same_findings(environments(every_example=10))


@pytest.mark.slow
def test_the_index_reports_what_assessing_every_entry_reports_for_every_example(cache):
    assert_same_findings(environments())


def test_the_index_holds_the_matrix_as_loaded(cache):
    loaded = load_matrix(bundled_matrix_dir(), (TEAM,))
    assert matrix_index.load_index(bundled_matrix_dir(), (TEAM,)).matrix() == loaded
    matrix_index._LOADED.clear()  # from the file now
    assert matrix_index.load_index(bundled_matrix_dir(), (TEAM,)).matrix() == loaded
    assert len(list(cache.glob("index-*.pickle"))) == 1


def copy_of_bundled(tmp_path: Path) -> Path:
    target = tmp_path / "bundled"
    shutil.copytree(bundled_matrix_dir() / "known-issues", target / "known-issues")
    return target


def test_a_changed_added_or_removed_file_is_another_index(cache, tmp_path):
    bundled = copy_of_bundled(tmp_path)
    files = sorted((bundled / "known-issues").glob("*.toml"))
    first = matrix_index.load_index(bundled)
    victim = next(i for i in first.matrix().issues if i.origin == str(files[0]))

    text = files[0].read_text(encoding="utf-8")
    files[0].write_text(text.replace(f'title = "{victim.title}"', 'title = "Edited title"', 1), encoding="utf-8")
    edited = matrix_index.load_index(bundled)
    assert {i.title for i in edited.matrix().issues if i.id == victim.id} == {"Edited title"}

    files[0].write_text(text, encoding="utf-8")  # back as it was: the first index again
    assert matrix_index.load_index(bundled).matrix() == first.matrix()

    removed = files[1].read_text(encoding="utf-8")
    files[1].unlink()
    assert matrix_index.load_index(bundled).count < first.count
    (bundled / "known-issues" / "zz-added.toml").write_text(removed, encoding="utf-8")
    files_back = matrix_index.load_index(bundled)
    assert files_back.count == first.count and files_back.matrix().issues[-1].origin.endswith("zz-added.toml")
    matrix_index._LOADED.clear()
    assert matrix_index.load_index(bundled).matrix() == files_back.matrix()  # and from the file


def test_a_changed_rule_of_the_code_is_another_index(cache, monkeypatch):
    before = matrix_index._key(bundled_matrix_dir(), ())
    monkeypatch.setattr(matrix_index, "FORMAT", matrix_index.FORMAT + 1)
    assert matrix_index._key(bundled_matrix_dir(), ()) != before


def test_a_damaged_index_is_rebuilt_not_an_error(cache):
    index = matrix_index.load_index(bundled_matrix_dir())
    (path,) = cache.glob("index-*.pickle")
    data = path.read_bytes()
    path.write_bytes(data[:-10] + b"0123456789")
    matrix_index._LOADED.clear()
    assert matrix_index.load_index(bundled_matrix_dir()).matrix() == index.matrix()
    path.write_bytes(b"")
    matrix_index._LOADED.clear()
    assert matrix_index.load_index(bundled_matrix_dir()).count == index.count


def test_without_a_cache_the_index_is_built_in_memory(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, "")
    monkeypatch.setattr(matrix_index, "_LOADED", {})
    assert matrix_index.load_index(bundled_matrix_dir()).matrix() == MATRIX


def test_the_candidates_of_known_versions_are_decided_once(cache, monkeypatch):
    index = matrix_index.load_index(bundled_matrix_dir())
    env = query_env("tensorflow==2.15.0", "gpus=2")
    first = index.candidates(env)
    assert len(list(cache.glob("candidates-*.json"))) == 1
    with monkeypatch.context() as patched:
        patched.setattr(matrix_index.MatrixIndex, "_candidate_positions", lambda *a: pytest.fail("decided again"))
        assert index.candidates(env) == first
    other = index.candidates(query_env("tensorflow==2.16.1", "gpus=2"))  # other versions: decided
    assert other != first and len(list(cache.glob("candidates-*.json"))) == 2


def test_the_entries_only_counted_are_read_once_per_environment(cache, monkeypatch):
    """The line counting entries reported on older releases is kept per environment: the next run
    of the same machine does not read those entries again (a team's thousands cost once)."""
    from mgpu_doctor.checks.known_issues import findings_for

    index = matrix_index.load_index(bundled_matrix_dir())
    env = query_env("tensorflow==2.21.0", "gpus=2", "strategy=mirrored")
    first = findings_for(index, env)
    assert any(f.code == "matrix.reported-older" for f in first)
    assert len(list(cache.glob("older-*.json"))) == 1
    with monkeypatch.context() as patched:
        patched.setattr(matrix_index.MatrixIndex, "counted_entries", lambda *a: pytest.fail("read again"))
        assert findings_for(index, env) == first
    other = findings_for(index, query_env("tensorflow==2.21.0", "gpus=2", "strategy=multi_gpu_model"))
    assert len(list(cache.glob("older-*.json"))) == 2 and other != first


def test_a_kept_index_is_read_by_its_header_and_the_candidates_only(cache, monkeypatch):
    """The quick check's cost does not grow with the matrix: a run unpickles the header and the
    entries it may report, never the whole file."""
    matrix_index.load_index(bundled_matrix_dir())
    matrix_index._LOADED.clear()
    unpickled: list[int] = []
    real_loads = matrix_index.pickle.loads
    monkeypatch.setattr(matrix_index.pickle, "loads", lambda data: unpickled.append(len(data)) or real_loads(data))
    index = matrix_index.load_index(bundled_matrix_dir())
    (path,) = cache.glob("index-*.pickle")
    assert len(unpickled) == 1 and unpickled[0] < path.stat().st_size / 4  # the header alone
    found = index.candidates(query_env("tensorflow==2.15.0", "python==3.11", "cuda==12.2", "cudnn==8.9",
                                       "keras==2.15.0", "nccl==2.18.3", "gpus=2"))
    assert 0 < len(found) < index.count and len(unpickled) == 1 + len(found)


def test_an_entry_damaged_in_the_middle_is_found_when_read_and_the_index_rebuilt(cache):
    built = matrix_index.load_index(bundled_matrix_dir())
    env = query_env("tensorflow==2.15.0", "gpus=2")
    expected = built.candidates(env)
    (path,) = cache.glob("index-*.pickle")
    data = bytearray(path.read_bytes())
    position = built.count // 2
    start, length, _ = built.spans[position]
    body = len(data) - len(built.data)  # where the entries start
    # one letter of the entry's summary changed: the entry still unpickles, only its CRC-32 tells
    summary = built.entry(position).summary.encode()
    at = bytes(data).index(summary[:40], body + start, body + start + length) + 10
    data[at] = ord("x") if data[at] != ord("x") else ord("y")
    path.write_bytes(bytes(data))
    matrix_index._LOADED.clear()
    damaged = matrix_index.load_index(bundled_matrix_dir())  # the header is intact: read
    assert damaged.matrix() == built.matrix() and damaged.candidates(env) == expected
    assert path.read_bytes() != bytes(data)  # written again, whole
    path.write_bytes(bytes(data[:-100]))  # cut short: refused before anything is read
    matrix_index._LOADED.clear()
    assert matrix_index.load_index(bundled_matrix_dir()).candidates(env) == expected
