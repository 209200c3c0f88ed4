"""The verdict on a hung job, from its reading alone (pure): which process is the odd one out
(stopped, exited, in uninterruptible I/O, still computing, waiting somewhere else), what the others
wait for, the next step, and the known hangs whose stack signatures the threads match."""

from __future__ import annotations

from collections.abc import Sequence

from mgpu_doctor.hang.classify import COLLECTIVE, GRAPH, WHAT, Wait, process_wait, thread_lines
from mgpu_doctor.matrix.known_issues import KnownIssue, known_issue_line
from mgpu_doctor.matrix.signatures import stack_hits
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Finding, Severity, status_for
from mgpu_doctor.model.hang import HangReading, ProcessReading
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import replace

NAME = "hang"
TITLE = "The running job"
MOVING = 0.10  # of one CPU over the interval: a process waiting on a collective spends about 0.01
CODES = ("hang.none", "hang.stopped", "hang.exited", "hang.uninterruptible", "hang.still-computing",
         "hang.waiting", "hang.stacks-unreadable", "hang.known-issue.ID")
STATES = {"R": "running", "S": "sleeping", "D": "in uninterruptible sleep", "T": "stopped",
          "t": "stopped by a debugger", "Z": "a zombie", "gone": "gone", "I": "idle"}

FIXES = {
    COLLECTIVE: "A collective that never completes while every worker waits in it: the network or NCCL "
                "(rerun with NCCL_DEBUG=INFO; NCCL_SOCKET_IFNAME), or workers that disagree on the number "
                "of steps (uneven data per worker: repeat() the dataset and set steps_per_epoch).",
    "startup": "A task of the cluster never came up or cannot be reached: check every TF_CONFIG address "
               "from each node (firewall, gRPC's proxy variables: `mgpu-doctor check`), and that every "
               "task started.",
    "checkpoint": "Checkpoint I/O: the file system (full, a stalled network mount), or a save that only "
                  "some workers make (under MultiWorkerMirroredStrategy every worker calls save).",
    "input": "The input pipeline delivers nothing: the generator, the PyDataset's worker processes or the "
             "files it reads (the innermost frame below); try workers=1 / use_multiprocessing=False "
             "once, and `py-spy dump` the worker processes.",
    GRAPH: "Inside a TensorFlow function with the CPU still: a collective inside the step (under a "
           "strategy), a device that stopped answering (`nvidia-smi`, `dmesg` for Xid errors), or an op "
           "waiting for input.",
    "python": "Python code that waits without a known frame: read the stack below.",
    "lock": "A lock, event or queue that nobody releases: the stacks below show which threads wait.",
}
RESUME = ("Resume it: `kill -CONT {pids}` (stopped by Ctrl-Z in its terminal, a debugger or the "
          "scheduler's suspend); the others go on when it is back, unless their collective timed out.")
EXITED = ("Read its log for why it ended (an exception, the OOM killer: `dmesg`), then restart the "
          "whole job: a collective cannot go on without it (BackupAndRestore resumes from the last epoch).")
UNINTERRUPTIBLE = ("The kernel waits on a disk, a network file system or the GPU driver for it: `dmesg` "
                   "(Xid errors, hung tasks), `cat /proc/PID/stack` as root, and the file systems it uses.")
NO_HANG = ("Slow, not stuck: compare its step time with a healthy run; `mgpu-doctor hang` again later "
           "shows whether the stacks move.")
STILL_COMPUTING = ("The others wait for it: it is slower (a bigger shard, a slower GPU, a loop), or it "
                   "took another path (an extra step, a collective they skip). Read its stack below; "
                   "`py-spy top --pid PID` shows where its time goes.")


def name_of(p: ProcessReading) -> str:
    if p.serves:
        return f"PID {p.pid} (a worker process of PID {p.serves})"
    return f"{p.role} (PID {p.pid})" if p.role else f"PID {p.pid}"


def names(ps: Sequence[ProcessReading]) -> str:
    roles = [p.role for p in ps]
    if all(roles) and len({r.split()[0] for r in roles}) == 1 and len(ps) > 1:
        kind = roles[0].split()[0]
        return f"{kind}s {_joined([r.split()[1] for r in roles])} (PIDs {_joined([str(p.pid) for p in ps])})"
    return _joined([name_of(p) for p in ps])


def _joined(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def moving(p: ProcessReading) -> bool:
    return p.cpu_fraction >= MOVING


def evidence_lines(p: ProcessReading) -> list[str]:
    """One line per process, then its threads that are not helpers."""
    wait = process_wait(p)
    gpus = ""
    if isinstance(p.gpus, list) and p.gpus:
        gpus = "; GPU " + ", ".join(f"{g.gpu_index} ({_mib(g.used_memory_bytes)}, "
                                    f"{_pct(g.utilisation_percent)})" for g in p.gpus)
    waits = f"; waits in {wait.kind}" if wait is not None and not moving(p) else ""
    lines = [f"{name_of(p)}: {STATES.get(p.state, p.state)} ({p.state}), CPU {p.cpu_fraction:.0%} over "
             f"{p.interval_s:.1f} s{gpus}{waits}"]
    if isinstance(p.threads, Unavailable):
        lines.append(f"  stacks: {p.threads.detail}")
    else:
        lines += [f"  {line}" for line in thread_lines(p)]
    return lines


def _mib(value: int | Unavailable) -> str:
    return f"{value // 2**20} MiB" if isinstance(value, int) else "memory ?"


def _pct(value: int | Unavailable) -> str:
    return f"{value}% busy" if isinstance(value, int) else "utilisation ?"


def hang_outcome(reading: HangReading, issues: Sequence[KnownIssue] = ()) -> CheckOutcome:
    """The check outcome of a reading: the verdict first, then the stacks that could not be read,
    then the known hangs the stacks match."""
    ps = reading.processes
    if not ps:
        return CheckOutcome(NAME, TITLE, CheckStatus.SKIPPED, skip_reason="no process was read")
    own = [p for p in ps if not p.serves]
    workers = [p for p in ps if p.serves]
    ordered = [q for p in own for q in [p] + [w for w in workers if w.serves == p.pid]]
    evidence = [line for p in ordered for line in evidence_lines(p)]
    verdict = _verdict(own, evidence)
    if workers:  # the job's processes decide the verdict; where their workers are explains it
        verdict = replace(verdict, title=verdict.title + _workers_clause(own, workers))
    findings = [verdict]
    findings += _unreadable(ps)
    findings += _known(ps, issues)
    return CheckOutcome(NAME, TITLE, status_for(findings), findings)


def _verb(group: Sequence[ProcessReading], one: str, many: str) -> str:
    return one if len(group) == 1 else many


def _verdict(ps: list[ProcessReading], evidence: list[str]) -> Finding:
    stopped = [p for p in ps if p.state in ("T", "t")]
    exited = [p for p in ps if p.state in ("Z", "gone")]
    blocked = [p for p in ps if p.state == "D"]
    rest = [p for p in ps if p not in stopped + exited + blocked]
    busy = [p for p in rest if moving(p)]
    waiting = [p for p in rest if not moving(p)]
    others = _others(waiting, peer_missing=bool(stopped or exited))
    if stopped:
        how = "(state T)" if all(p.state == "T" for p in stopped) else "(by a debugger: state t)"
        return Finding("hang.stopped", Severity.ERROR,
                       f"{names(stopped)} {_verb(stopped, 'is', 'are')} stopped {how}{others}", evidence,
                       RESUME.format(pids=" ".join(str(p.pid) for p in stopped)))
    if exited:
        return Finding("hang.exited", Severity.ERROR,
                       f"{names(exited)} {_verb(exited, 'has', 'have')} exited{others}", evidence, EXITED)
    if blocked:
        return Finding("hang.uninterruptible", Severity.ERROR,
                       f"{names(blocked)} {_verb(blocked, 'is', 'are')} in uninterruptible sleep (state D)"
                       f"{others}", evidence, UNINTERRUPTIBLE)
    if not waiting:
        who = names(busy) if len(busy) < 4 else f"all {len(busy)} processes"
        return Finding("hang.none", Severity.OK,
                       f"No hang: {who} {_verb(busy, 'computes', 'compute')} (CPU time moves)", evidence,
                       NO_HANG)
    if busy:
        return Finding("hang.still-computing", Severity.ERROR,
                       f"{names(busy)} still {_verb(busy, 'computes', 'compute')} (CPU time moves)"
                       f"{_others(waiting, False)}", evidence, STILL_COMPUTING)
    groups = _by_kind(waiting)
    # The smallest group is the odd one out; on a tie, the more telling wait.
    ranked = sorted(groups.items(), key=lambda item: (len(item[1]), _rank(item[0])))
    kind, odd = ranked[0]
    if len(groups) == 1 and len(waiting) > 1:
        title = f"Every process waits {_where(kind, odd[0], False, True)}, its CPU time still"
    else:
        title = "; ".join(f"{names(g)} {_verb(g, 'waits', 'wait')} {_where(k, g[0], False, len(g) > 1)}"
                          for k, g in ranked)
    return Finding("hang.waiting", Severity.ERROR, title, evidence, FIXES.get(kind, FIXES["python"]))


def _by_kind(waiting: list[ProcessReading]) -> dict[str, list[ProcessReading]]:
    groups: dict[str, list[ProcessReading]] = {}
    for p in waiting:
        wait = process_wait(p)
        groups.setdefault(wait.kind if wait is not None else "unknown", []).append(p)
    return groups


def _rank(kind: str) -> int:
    order = list(WHAT)
    return order.index(kind) if kind in order else len(order)


def _others(waiting: list[ProcessReading], peer_missing: bool) -> str:
    """'; workers 0 and 2 wait in ...' for the processes that wait."""
    return "".join(f"; {names(g)} {_verb(g, 'waits', 'wait')} {_where(k, g[0], peer_missing, len(g) > 1)}"
                   for k, g in _by_kind(waiting).items())


def _where(kind: str, p: ProcessReading, peer_missing: bool, many: bool) -> str:
    wait: Wait | None = process_wait(p)
    at = f" ({wait.frame})" if wait is not None and wait.frame is not None else ""
    if kind == COLLECTIVE:
        return f"in a collective{at}"
    if kind == GRAPH and (peer_missing or (many and p.role)):
        # Idle inside the step of a multi-worker job whose peer is missing: where the step's
        # all-reduce runs (inside a tf.function no Python frame shows the collective itself).
        return "in the all-reduce of their training step (inside a tf.function)" if many else \
            "in the all-reduce of its training step (inside a tf.function)"
    if kind == "unknown":
        return "somewhere its stack could not show"
    return f"in {WHAT.get(kind, kind)}{at}"


def _workers_clause(own: list[ProcessReading], workers: list[ProcessReading]) -> str:
    """'; the 2 worker processes of PID 7 (PIDs 8 and 9) wait in ...', per process that has any."""
    clauses = []
    for parent in own:
        mine = [w for w in workers if w.serves == parent.pid]
        if not mine:
            continue
        groups: dict[str, list[ProcessReading]] = {}
        for w in mine:
            groups.setdefault(_worker_doing(w), []).append(w)
        what = ", ".join(
            f"{'PID' if len(g) == 1 else 'PIDs'} {_joined([str(w.pid) for w in g])} "
            f"{_worker_verb(doing, g)}" for doing, g in groups.items())
        count = "worker process" if len(mine) == 1 else f"{len(mine)} worker processes"
        whose = f"the {count} of {name_of(parent)}" if len(own) > 1 else f"its {count}"
        clauses.append(f"; {whose}: {what}")
    return "".join(clauses)


def _worker_doing(w: ProcessReading) -> str:
    if w.state in ("T", "t", "Z", "gone", "D"):
        return STATES.get(w.state, w.state)
    if moving(w):
        return "compute"
    wait = process_wait(w)
    if wait is None:
        return _where("unknown", w, False, False)
    threads = w.threads if isinstance(w.threads, list) else []
    inner = next((t.frames[0] for t in threads if t.name == wait.thread and t.frames), None)
    # A worker's innermost frame is where the user's data code is stuck (`__getitem__`, a read).
    where = _where(wait.kind, w, False, False)
    return where + (f", innermost {inner}" if inner is not None and inner != wait.frame else "")


def _worker_verb(doing: str, group: list[ProcessReading]) -> str:
    if doing == "compute":
        return _verb(group, "computes (CPU time moves)", "compute (CPU time moves)")
    if doing in STATES.values():
        return f"{_verb(group, 'is', 'are')} {doing}"
    return f"{_verb(group, 'waits', 'wait')} {doing}"


def _unreadable(ps: list[ProcessReading]) -> list[Finding]:
    """One line per cause that kept stacks from being read (ptrace denied, py-spy failing)."""
    causes: dict[str, list[ProcessReading]] = {}
    for p in ps:
        if isinstance(p.threads, Unavailable) and p.threads.cause not in ("gone", "zombie"):
            causes.setdefault(p.threads.cause, []).append(p)
    findings = []
    for group in causes.values():
        detail = group[0].threads.detail if isinstance(group[0].threads, Unavailable) else ""
        findings.append(Finding("hang.stacks-unreadable", Severity.WARNING,
                                f"Stacks not read for {names(group)}: {detail}"))
    return findings


def _known(ps: list[ProcessReading], issues: Sequence[KnownIssue]) -> list[Finding]:
    findings = []
    seen: set[str] = set()
    with_frames = [i for i in issues if any(s.frames for s in i.signatures)]
    for p in ps:
        if not isinstance(p.threads, list):
            continue
        for hit in stack_hits(with_frames, p.threads):
            if hit.issue.id in seen:
                continue
            seen.add(hit.issue.id)
            thread = hit.thread.name or hit.thread.thread_id
            findings.append(Finding(
                f"hang.known-issue.{hit.issue.id}", Severity.WARNING, f"Known hang: {hit.issue.title}",
                [known_issue_line(hit.issue.id), f"{name_of(p)}, thread {thread}: {hit.frame}",
                 f"the stack signature (from {hit.signature.source}): " + " <- ".join(hit.signature.frames)],
                hit.issue.workaround, [s.cite for s in hit.issue.sources if s.cite]))
    return findings
