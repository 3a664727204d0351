"""Undo's checkpoints beside Kishu's (issue 35, Figures): a step writing into a 240 MB and a 2.4 GB DataFrame, an
800 MB numpy array and a one-million-item dict — the checkpoint's time and extra memory, the step's time with undo
on and off, taking the step back and whether the value is as it was.

    .venv/bin/python benchmarks/bench_undo.py

**Ours.** Each case runs in fresh processes, one at a time (the machine's memory is shared), once with undo off and
once on: an IPython shell builds the data, then the step's code runs as the ``python`` tool runs it
(``run_python``); with undo on, ``undo.checkpoints.take`` (the names its syntax tree touches, ``Journal.names``,
``snapshot.keep``) runs right before it, ``Journal.leave`` (what the step left, so that undo keeps the user's later
changes) right after it, and ``Journal.take_back`` after that; the checkpoint's column counts both. Memory is the process's RSS (``/proc``),
not tracemalloc: the data lives in numpy's buffers and pandas' blocks, and the user's kernel pays in RSS; tracemalloc
would also slow the dict case's million small objects. Under copy-on-write a pandas checkpoint costs nothing when it
is taken and its copy appears when the step writes, so the extra memory is RSS after the step with undo on minus
with it off. Restored means the same bytes as before the step (blake2b of the data, index and columns).

**Kishu** (PyPI ``kishu``, pinned; installed by this script into ``benchmarks/.peer-venv-kishu`` or
``$SHIRO_BENCH_KISHU_VENV``, kept between runs): the same code as notebook cells in a real ipykernel started from
that venv, with ``init_kishu(notebook)`` run as ``kishu init`` runs it (a silent execution), and beside it a kernel
without Kishu. Marks registered around Kishu's ``pre_run_cell`` / ``post_run_cell`` hooks split each cell into
Kishu's work before, the code, and Kishu's work after (its checkpoint: detecting what changed, writing it). Bytes
are the growth of its ``.kishudb`` (SQLite beside the notebook). Undo is what ``KishuCommand.undo`` does: find the
automatic commit before the newest and send ``_kishu.checkout(id, skip_notebook=True)`` to the kernel; it is run the
same way here, since ``KishuCommand.undo`` itself finds the kernel through a running Jupyter server's sessions.
Kishu's test mode is on (``ENV_KISHU_TEST_MODE``): there is no front end to save the notebook, and its save waits
(at least 0.2 s, 1.5 s without a front end) would otherwise be counted in the checkout.

A Kishu cell or checkout over 5 minutes (``$SHIRO_BENCH_UNDO_LIMIT_S``) is stopped, and a run the machine's free
memory cannot hold is not started; the table says which. ``SHIRO_BENCH_UNDO_CASES=array800,dict1m`` runs some only.

**How Kishu finds what a cell touched, against ours.** Kishu swaps the kernel's namespace for a dict subclass that
records each name read or assigned during the cell; after it, it redoes an "ID graph" (a dill pickling pass, arrays
hashed with xxhash) of every variable linked to those names and compares it with the one from before; what differs
is pickled whole, with its co-variables (names sharing an object), into SQLite. Exact, but a pass over all the touched
data after every cell and the whole variable on disk. Ours reads the syntax tree before the step and keeps in memory
what it may change (pandas by copy-on-write, paid when written). Worth taking: co-variables (names sharing an object
restored together: ours's stated limit), and the recording namespace as a cheap check for names bound unseen (exec,
globals()); not the hashing pass, nor the disk.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _peervenv

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEER_REQUIREMENTS = ["kishu==0.3.4"]
PEER_VENV = Path(os.environ.get("SHIRO_BENCH_KISHU_VENV") or HERE / ".peer-venv-kishu")
MB = 1_000_000
GIB = 1 << 30
#: a Kishu cell or checkout longer than this is stopped and said (too big for it here)
CELL_LIMIT_S = float(os.environ.get("SHIRO_BENCH_UNDO_LIMIT_S") or 300)

FRAME = """import numpy as np, pandas as pd
_data = np.random.default_rng(0).random(({rows}, 10))
_data[::1000, 1] = np.nan
df = pd.DataFrame(_data, columns=list("abcdefghij"))
del _data"""
SET_CELLS = 'df.loc[df.index[:10], "a"] = 0'
DROPNA = "df.dropna(inplace=True)"
BIG_LIMIT_MB = 8000.0  # Shiro.undo_max_mb raised for the 2.4 GB frame: at the default (1024 MB) it is not kept


@dataclass(frozen=True)
class Case:
    key: str
    title: str
    name: str  # the variable the step changes
    setup: str
    step: str
    writes: str  # what the step writes, in words: the figure the extra memory is read against
    needs_gib: float  # memory the Kishu side needs at its peak here (measured), checked before a run
    ours_gib: float  # the same for ours (building the data, the step, the fingerprints)
    repeats: int  # fresh processes of ours per mode (Kishu's figures are seconds: one run each)
    #: Shiro.undo_max_mb for this case (None: its default); the default's outcome is measured beside it
    limit_mb: float | None = None


CASES = [
    Case("df240-set", "240 MB DataFrame, 10 cells set", "df", FRAME.format(rows=3_000_000), SET_CELLS,
         "10 values of one column (24 MB column under copy-on-write)", 2, 1, 3),
    Case("df240-dropna", "240 MB DataFrame, dropna(inplace=True)", "df", FRAME.format(rows=3_000_000), DROPNA,
         "a new frame of 240 MB", 2, 1, 3),
    Case("df2400-set", "2.4 GB DataFrame, 10 cells set", "df", FRAME.format(rows=30_000_000), SET_CELLS,
         "10 values of one column (240 MB column under copy-on-write)", 12, 6, 3, BIG_LIMIT_MB),
    Case("df2400-dropna", "2.4 GB DataFrame, dropna(inplace=True)", "df", FRAME.format(rows=30_000_000), DROPNA,
         "a new frame of 2.4 GB", 14, 8, 3, BIG_LIMIT_MB),
    Case("array800", "800 MB numpy array, arr += 1", "arr",
         "import numpy as np\narr = np.random.default_rng(0).random(100_000_000)", "arr += 1",
         "all 800 MB in place", 4, 2, 3),
    Case("dict1m", "1,000,000-item dict, d[1] = 2", "d", "d = {i: i for i in range(1_000_000)}", "d[1] = 2",
         "one item", 1, 1, 3),
]  # fmt: skip

# Measuring helpers, run in our child and in each Kishu kernel alike (names start with "_": Kishu ignores them).
HELPERS = r'''
import gc as _bench_gc, hashlib as _bench_hashlib, pickle as _bench_pickle

def _bench_fingerprint(v):
    """The value's bytes, hashed: its data, index and columns for pandas, data and shape for numpy."""
    h = _bench_hashlib.blake2b(digest_size=16)
    h.update(type(v).__name__.encode())
    if type(v).__name__ == "DataFrame":
        import numpy as np
        h.update(repr((list(v.columns), [str(t) for t in v.dtypes], v.shape)).encode())
        h.update(np.ascontiguousarray(v.index.to_numpy()))
        for c in v.columns:
            h.update(np.ascontiguousarray(v[c].to_numpy()))
    elif type(v).__name__ == "ndarray":
        import numpy as np
        h.update(repr((v.shape, str(v.dtype))).encode())
        h.update(np.ascontiguousarray(v))
    else:
        h.update(_bench_pickle.dumps(v, protocol=5))
    return h.hexdigest()

def _bench_rss():
    _bench_gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * __import__("os").sysconf("SC_PAGE_SIZE")

def _bench_peak():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))

def _bench_reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
'''

# Marks around Kishu's hooks: registered after init_kishu, first and last of pre_run_cell and of post_run_cell.
MARKS = r"""
import time as _bench_time
_bench_marks = {}
def _bench_mark(key):
    def mark(*args):
        _bench_marks[key] = _bench_time.perf_counter()
    return mark
_bench_events = get_ipython().events
_bench_events.callbacks["pre_run_cell"].insert(0, _bench_mark("pre0"))
_bench_events.callbacks["pre_run_cell"].append(_bench_mark("pre1"))
_bench_events.callbacks["post_run_cell"].insert(0, _bench_mark("post0"))
_bench_events.callbacks["post_run_cell"].append(_bench_mark("post1"))
"""

# The Kishu side: a driver run by the peer venv's Python, starting one kernel from that venv (with Kishu or without)
# and printing its figures as JSON on a marked line.
KISHU_CHILD = r"""
import ast, json, os, sys, time, pathlib
import nbformat
from jupyter_client.manager import KernelManager
cfg = json.loads(sys.argv[1])
tmp = pathlib.Path(cfg["tmp"])
spec = tmp / "jupyter" / "kernels" / "kishu-bench"
spec.mkdir(parents=True)
(spec / "kernel.json").write_text(json.dumps({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f",
    "{connection_file}"], "display_name": "kishu-bench", "language": "python"}))
nb = tmp / "bench.ipynb"
nbformat.write(nbformat.v4.new_notebook(), nb)
env = {**os.environ, "JUPYTER_PATH": str(tmp / "jupyter"), "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
       "IPYTHONDIR": str(tmp / "ipython"), "KISHU_PATH_ROOT": str(tmp), "ENV_KISHU_TEST_MODE": "1"}
os.environ.update(env)
(tmp / "runtime").mkdir()
# a connection file named as Jupyter names it: Kishu reads the kernel's id from it
km = KernelManager(kernel_name="kishu-bench", connection_file=str(tmp / "runtime" / "kernel-bench-1.json"))
km.start_kernel(env=env, cwd=str(tmp))
kc = km.client()
kc.start_channels()
kc.wait_for_ready(timeout=120)
out = {"phase": "start"}

def run(code, expr=None, silent=False):
    t = time.perf_counter()
    reply = kc.execute_interactive(code, silent=silent, user_expressions={"r": expr} if expr else None,
                                   timeout=cfg["limit"], output_hook=lambda m: None)
    took = time.perf_counter() - t
    c = reply["content"]
    if c["status"] != "ok":
        raise RuntimeError(f"{out['phase']}: {c.get('ename')}: {c.get('evalue')}")
    if expr is None:
        return took, None
    r = c["user_expressions"]["r"]
    if r["status"] != "ok":
        raise RuntimeError(f"{out['phase']}: {r.get('ename')}: {r.get('evalue')}")
    return took, ast.literal_eval(r["data"]["text/plain"])

def db_bytes():
    return sum(p.stat().st_size for p in tmp.glob("bench.kishudb*"))

def marks():
    m = probe("_bench_marks")
    return {"pre": m["pre1"] - m["pre0"], "code": m["post0"] - m["pre1"], "post": m["post1"] - m["post0"]}

def probe(expr):
    return json.loads(run("", f"__import__('json').dumps({expr})", silent=True)[1])

try:
    if cfg["kishu"]:
        out["phase"] = "init_kishu"
        out["init"] = run(f"from kishu import init_kishu; init_kishu({str(nb)!r})", silent=True)[0]
    run(cfg["helpers"], silent=True)
    run(cfg["marks"], silent=True)
    out["phase"] = "setup"
    db0 = db_bytes()
    out["setup_cell"] = run(cfg["setup"])[0]
    out["setup_marks"] = marks()
    out["setup_db"] = db_bytes() - db0
    name = cfg["name"]
    fp0 = probe(f"_bench_fingerprint({name})")
    out["rss0"] = probe("_bench_rss()")
    run("_bench_reset_peak()", silent=True)
    db1 = db_bytes()
    out["phase"] = "step"
    out["step_cell"] = run(cfg["step"])[0]
    out["step_marks"] = marks()
    out["peak"] = probe("_bench_peak()")
    out["rss1"] = probe("_bench_rss()")
    out["step_db"] = db_bytes() - db1
    out["changed"] = probe(f"_bench_fingerprint({name})") != fp0
    if cfg["kishu"]:
        out["phase"] = "undo"
        # KishuCommand.undo's choice: the automatic (per-cell) commit before the newest, checked out without the
        # notebook; sent to the kernel as KishuCommand does (a silent execution)
        from kishu.storage.commit import CommitEntryKind, KishuCommit
        from kishu.storage.commit_graph import KishuCommitGraph
        db = tmp / "bench.kishudb"
        ids = [n.commit_id for n in KishuCommitGraph.new_var_graph(db).list_history()]
        entries = KishuCommit(db).get_commits(ids)
        auto = [entries[i] for i in ids if entries[i].kind == CommitEntryKind.jupyter]
        out["kishu_checkpoint_s"] = auto[0].checkpoint_runtime_s
        out["undo"] = run("", f"str(_kishu.checkout({auto[1].commit_id!r}, skip_notebook=True))", silent=True)[0]
        out["restored"] = probe(f"_bench_fingerprint({name})") == fp0
    out["phase"] = "done"
except TimeoutError:
    out["timeout"] = out["phase"]
except Exception as exc:
    out["error"] = str(exc)[:300]
finally:
    km.shutdown_kernel(now=True)
print("@@RESULT " + json.dumps(out), flush=True)
"""


# -- ours: one fresh process per case and mode ------------------------------------------------------------------
def ours_child(key: str, undo: bool) -> dict[str, Any]:
    """One case, in this (fresh) process: build the data, take the checkpoint (undo on), run the step as the python
    tool does, take it back; the figures."""
    from IPython.core.interactiveshell import InteractiveShell

    from shiro_kernel.config import Shiro
    from shiro_kernel.tools import ToolContext, all_tools
    from shiro_kernel.tools.python_tool import run_python
    from shiro_kernel.transcript import ToolCallPart
    from shiro_kernel.undo import checkpoints
    from shiro_kernel.undo.journal import Journal

    case = next(c for c in CASES if c.key == key)
    helpers: dict[str, Any] = {}
    exec(HELPERS, helpers)
    shell = InteractiveShell.instance()
    if not shell.run_cell(case.setup, store_history=False).success:
        raise SystemExit(f"setup failed: {case.setup!r}")
    ns = shell.user_ns
    tool = all_tools()["python"]
    ctx = ToolContext(root=Path(tempfile.mkdtemp()), shell=shell)
    default_mb = float(Shiro.class_traits()["undo_max_mb"].default_value)
    limit_mb = case.limit_mb or default_mb
    overhead = [_timed(run_python, shell, "pass")[0] for _ in range(5)]  # warm, and the tool's own cost
    call = ToolCallPart("call-1", "python", json.dumps({"code": case.step}))
    fp0 = helpers["_bench_fingerprint"](ns[case.name])
    out: dict[str, Any] = {"tool_overhead": statistics.median(overhead), "limit_mb": limit_mb}
    if undo and case.limit_mb:  # what the default does with it: named, not kept
        took, step = _timed(checkpoints.take, Journal(lambda: default_mb), "t", call, tool, ctx)
        saved = step.names[case.name] if step else None
        out["at_default"] = {"seconds": took, "limit_mb": default_mb, "why": getattr(saved, "why", "kept")}
        del step, saved
    if undo:  # warm: the first checkpoint of a process pays for imports and first lookups
        checkpoints.take(Journal(lambda: limit_mb), "warm", call, tool, ctx)
    rss0 = helpers["_bench_rss"]()
    helpers["_bench_reset_peak"]()
    journal = Journal(lambda: limit_mb)
    if undo:  # the checkpoint's time: the median of 5, four on journals thrown away, the last one kept
        seconds = [_timed(checkpoints.take, Journal(lambda: limit_mb), "t", call, tool, ctx)[0] for _ in range(4)]
        took, step = _timed(checkpoints.take, journal, "turn-1", call, tool, ctx)
        out["checkpoint"] = statistics.median([*seconds, took])
        out["held"] = helpers["_bench_rss"]() - rss0
        out["journal_mb"] = step.nbytes / MB if step else 0.0
        out["kept_as"] = {n: getattr(s, "how", type(s).__name__) for n, s in (step.names if step else {}).items()}
    took, result = _timed(run_python, shell, case.step)
    if "Traceback (most recent call last)" in result.text:  # a warning is output too (pandas 3.1's on inplace=)
        raise SystemExit(f"the step failed: {result.text[-500:]}")
    out["step"] = took
    out["peak"] = helpers["_bench_peak"]() - rss0
    out["extra"] = helpers["_bench_rss"]() - rss0
    out["changed"] = helpers["_bench_fingerprint"](ns[case.name]) != fp0
    if undo and step is not None:  # what the step left (Journal.leave), recorded right after it ran: median of 5
        out["left"] = statistics.median(_timed(journal.leave, step, ns)[0] for _ in range(5))
    if undo:
        took, report = _timed(journal.take_back, journal.last_turn(), ns)
        out["undo"] = took
        out["restored"] = case.name in report.restored and helpers["_bench_fingerprint"](ns[case.name]) == fp0
        out["report"] = report.text()
    return out


def _timed(fn: Any, *args: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - t, value


def run_ours(case: Case, undo: bool) -> dict[str, Any]:
    env = {**os.environ, "SHIRO_HOME": tempfile.mkdtemp(), "IPYTHONDIR": tempfile.mkdtemp()}
    proc = subprocess.run(
        [sys.executable, __file__, "--ours", case.key, "on" if undo else "off"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    return _result(proc)


def _result(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    for line in proc.stdout.splitlines():
        if line.startswith("@@RESULT "):
            return dict(json.loads(line[len("@@RESULT ") :]))
    return {"error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-400:]}"}


# -- Kishu: its venv, one kernel per case and mode ----------------------------------------------------------------
def peer_python() -> Path:
    """The peer venv's interpreter (:func:`_peervenv.peer_python`)."""
    return _peervenv.peer_python(PEER_VENV, PEER_REQUIREMENTS, "kishu, ipykernel, jupyter_client, pandas", "Kishu")


def run_kishu(py: Path, case: Case, kishu: bool) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="kishu-bench-"))
    cfg = {
        "tmp": str(tmp),
        "kishu": kishu,
        "helpers": HELPERS,
        "marks": MARKS,
        "setup": case.setup,
        "step": case.step,
        "name": case.name,
        "limit": CELL_LIMIT_S,
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHIRO_", "JUPYTER_", "PYTHONPATH"))}
    try:
        proc = subprocess.run(
            [str(py), "-c", KISHU_CHILD, json.dumps(cfg)],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=6 * CELL_LIMIT_S,
            check=False,
        )
        return _result(proc)
    except subprocess.TimeoutExpired:
        return {"timeout": "the whole run"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- the run --------------------------------------------------------------------------------------------------------
def available_gib() -> float:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")) / GIB


def no_room(gib: float) -> str:
    """Why a run needing ``gib`` of memory is not started now ('' when it is): the machine's memory is shared."""
    free = available_gib()
    return f"not run: needs ~{gib:g} GiB, {free:.1f} GiB available" if free < gib else ""


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}" if seconds >= 0.1 else f"{seconds * 1000:.2f}"


def ratio_text(ratio: float) -> str:
    return f"x{ratio:,.0f}" if ratio >= 100 else f"x{ratio:.1f}"


def mb(nbytes: float) -> str:
    return "0" if abs(nbytes) < MB / 2 else f"{nbytes / MB:,.0f}"  # never "-0"


def failed(runs: list[dict[str, Any]]) -> str:
    """Why a side's runs gave no figures ('' when they did)."""
    for r in runs:
        if "timeout" in r:
            return f"stopped: over the {CELL_LIMIT_S:g} s limit ({r['timeout']})"
        if "error" in r:
            return f"failed: {r['error']}"
        if "skipped" in r:
            return str(r["skipped"])
    return ""


def main() -> None:
    started = time.perf_counter()
    py = peer_python()
    only = set(os.environ.get("SHIRO_BENCH_UNDO_CASES", "").split(",")) - {""}
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for case in CASES:
        if only and case.key not in only:
            continue
        print(f"{case.key} ...", file=sys.stderr)
        sides: dict[str, list[dict[str, Any]]] = {"off": [], "on": [], "plain": [], "kishu": []}
        for _ in range(case.repeats):  # one at a time, each in a process of its own: the memory is freed between
            for undo in (False, True):
                short = no_room(case.ours_gib)
                sides["on" if undo else "off"].append({"skipped": short} if short else run_ours(case, undo))
        for kishu in (False, True):
            short = no_room(case.needs_gib)
            sides["kishu" if kishu else "plain"].append({"skipped": short} if short else run_kishu(py, case, kishu))
        results[case.key] = sides
    print(report(results, py, time.perf_counter() - started))


def report(results: dict[str, dict[str, list[dict[str, Any]]]], py: Path, seconds: float) -> str:
    header = "| case | checkpoint ms | {} | step ms without / with | with/without | undo ms | restored? | {} |"
    rule = "|" + "---|" * 9
    ours_extra = ("extra MB at checkpoint / after step", "kept as (journal MB) | extra peak MB")
    ours = ["shiro_kernel, checkpoints in memory:", "", header.format(*ours_extra), rule]
    kishu_extra = ("extra MB after step", "written to disk MB | extra peak MB")
    kishu = ["Kishu, checkpoints to disk:", "", header.format(*kishu_extra), rule]
    goals: list[str] = []
    for case in CASES:
        if case.key not in results:
            continue
        sides = results[case.key]
        ours.append(ours_row(case, sides["off"], sides["on"], goals))
        kishu.append(kishu_row(case, sides["plain"], sides["kishu"]))
    notes = [
        "",
        "Goals (issue 35):",
        *goals,
        "",
        "checkpoint: ours = undo.checkpoints.take on the python call (names from the syntax tree, snapshots), median of 5;",
        "Kishu = its pre_run_cell + post_run_cell hooks (finding what changed, writing it). step: the code alone",
        "(ours: as the python tool runs it, run_python, whose own cost is in the last note; Kishu: between its hooks).",
        "with/without: (checkpoint + step with it) / step without. extra MB: RSS after the step, with minus without;",
        "extra peak: the process's peak RSS (VmHWM, reset before the checkpoint) over its start, with minus without.",
        "undo: ours = Journal.take_back; Kishu = _kishu.checkout of the commit before (as KishuCommand.undo), a",
        "round trip to the kernel. restored?: the variable's bytes equal those before the step (and differed after it).",
        "journal MB: what the journal counts against Shiro.undo_max_mb for the checkpoint.",
        "Ours: medians of fresh processes (3 per mode); Kishu: one kernel per mode and case;",
        "all run one at a time.",
        f"Kishu {_peervenv.version_of(py, 'kishu')} (pandas {_peervenv.version_of(py, 'pandas')}, numpy {_peervenv.version_of(py, 'numpy')}) in its own "
        f"venv; ours: pandas {_peervenv.version_of(Path(sys.executable), 'pandas')}, numpy {_peervenv.version_of(Path(sys.executable), 'numpy')}.",
    ]
    for case in CASES:
        at = [r["at_default"] for r in results.get(case.key, {}).get("on", []) if "at_default" in r]
        if at:
            notes.append(
                f"{case.title}: Shiro.undo_max_mb raised to {case.limit_mb:,.0f} MB for its row; at the default "
                f"({at[0]['limit_mb']:,.0f} MB) the checkpoint names it not restorable in {ms(at[0]['seconds'])} ms "
                f"({at[0]['why']})."
            )
    tool = [r.get("tool_overhead") for s in results.values() for r in s["off"] if "tool_overhead" in r]
    if tool:
        notes.append(f"The python tool's own cost (run_python of 'pass'): {ms(statistics.median(tool))} ms.")
    notes.append(f"(this script: {seconds:.0f} s, not counting the one-time Kishu install)")
    return "\n".join([*ours, "", *kishu, *notes])


def ours_row(case: Case, off: list[dict[str, Any]], on: list[dict[str, Any]], goals: list[str]) -> str:
    why = failed(off + on)
    if why:
        goals.append(f"- {case.title}: {why}")
        return f"| {case.title} | {why} |" + " |" * 7
    checkpoint = median_of(on, "checkpoint") + (median_of(on, "left") if all("left" in r for r in on) else 0.0)
    step_off, step_on = median_of(off, "step"), median_of(on, "step")
    extra = median_of(on, "extra") - median_of(off, "extra")
    ratio = (checkpoint + step_on) / step_off
    restored = all(r["restored"] and r["changed"] for r in on)
    kept = ", ".join(sorted({h for r in on for h in r["kept_as"].values()}))
    journal = median_of(on, "journal_mb")
    peak = median_of(on, "peak") - median_of(off, "peak")
    if case.name == "df":
        share = checkpoint / step_off
        goals.append(
            f"- pandas, {case.title}: checkpoint ≤ 5 % of the step: "
            f"{'met' if share <= 0.05 else 'missed'} ({share:.1%} of {ms(step_off)} ms)"
        )
    goals.append(f"- {case.title}: extra memory {mb(extra)} MB against what the step writes: {case.writes}")
    return (
        f"| {case.title} | {ms(checkpoint)} | {mb(median_of(on, 'held'))} / {mb(extra)} | {ms(step_off)} / {ms(step_on)} | {ratio_text(ratio)} | "
        f"{ms(median_of(on, 'undo'))} | {'yes' if restored else 'NO'} | {kept} ({journal:,.0f}) | {mb(peak)} |"
    )


def kishu_row(case: Case, plain: list[dict[str, Any]], kishu: list[dict[str, Any]]) -> str:
    why = failed(plain + kishu)
    if why:
        return f"| {case.title} | {why} |" + " |" * 7
    hooks = [r["step_marks"]["pre"] + r["step_marks"]["post"] for r in kishu]
    code_on = statistics.median(r["step_marks"]["code"] for r in kishu)
    code_off = statistics.median(r["step_marks"]["code"] for r in plain)
    extra = median_of(kishu, "rss1") - median_of(kishu, "rss0") - (median_of(plain, "rss1") - median_of(plain, "rss0"))
    peak = median_of(kishu, "peak") - median_of(kishu, "rss0") - (median_of(plain, "peak") - median_of(plain, "rss0"))
    restored = all(r["restored"] and r["changed"] for r in kishu)
    first = statistics.median(r["setup_db"] for r in kishu)
    return (
        f"| {case.title} | {ms(statistics.median(hooks))} | {mb(extra)} | {ms(code_off)} / {ms(code_on)} | "
        f"{ratio_text((statistics.median(hooks) + code_on) / code_off)} | {ms(median_of(kishu, 'undo'))} | "
        f"{'yes' if restored else 'NO'} | {mb(median_of(kishu, 'step_db'))} (first checkpoint of the data: "
        f"{mb(first)}) | {mb(peak)} |"
    )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--ours":
        print("@@RESULT " + json.dumps(ours_child(sys.argv[2], sys.argv[3] == "on")), flush=True)
    else:
        main()
