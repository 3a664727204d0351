"""The fault suite: each case injects a fault, bounded in count and time (loopback only), and checks
that nothing is lost and the transcript stays consistent. Each case records its figure
(:mod:`faultlog`); ``./scripts/reliability.sh`` writes the table to docs/reliability.md."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import re
import signal
import string
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Fault, Reply
from faultlog import record
from fsutil import cut_short
from historycheck import pairing_problems

from shiro_kernel.provider.client import Provider, ProviderSettings
from shiro_kernel.session import Session
from shiro_kernel.store import files as storage
from shiro_kernel.store.autosave import Autosaver
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.tools import ToolContext, all_tools, run_tool
from shiro_kernel.transcript import Message, TextPart, ToolCallPart, ToolResultPart
from shiro_kernel.turn import Turn, TurnOptions

KEY = "sk-fault-SUITE-key-must-never-be-written-7f3a9c"


def consistent(messages: list[Message]) -> bool:
    """Every result has its call and every call has its result: checked by the suite's own pairing check
    (:mod:`historycheck`), never by the rules module under test."""
    return not pairing_problems(messages)


# -- 1. SIGKILL during autosave ------------------------------------------------------------------
def _autosave_child(home: str, sid: str) -> None:
    os.environ["SHIRO_HOME"] = home
    store = SessionStore(Path(home) / "sessions")
    session = store.load(sid)
    saver = Autosaver(store, session, lambda: "gpt-test", delay=0.0, at_exit=False)
    n = 0
    while True:  # change the session as fast as possible; every change schedules a save
        n += 1
        session.append(Message("assistant", [TextPart(f"step {n} " + "y" * random.randint(10, 200_000))]))
        saver.flush()


@pytest.mark.timeout(120)
def test_sigkill_during_autosave_loses_no_record(tmp_path):
    home = tmp_path / "home"
    store = SessionStore(home / "sessions")
    session = Session(messages=[Message.user("survive the kill")])
    store.save(session, model="gpt-test")
    ctx = multiprocessing.get_context("fork")
    trials, bad, started = 100, 0, time.perf_counter()
    for _ in range(trials):
        proc = ctx.Process(target=_autosave_child, args=(str(home), session.id))
        proc.start()
        time.sleep(random.uniform(0.02, 0.12))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        try:
            data = json.loads(store.path_for(session.id).read_text())
            assert data["messages"][0]["parts"][0]["text"] == "survive the kill"
        except (ValueError, AssertionError, KeyError, IndexError):
            bad += 1
    assert [i.id for i in SessionStore(home / "sessions").list()] == [session.id]
    assert bad == 0
    record(
        "SIGKILL of a process during autosave",
        trials,
        bad,
        f"record always complete; {time.perf_counter() - started:.1f} s",
    )


# -- 2. concurrent stores ----------------------------------------------------------------------------
def _remember_child(root: str, worker: int) -> None:
    from shiro_kernel.memory import notes

    notes.MAX_ENTRIES = 1000  # the seed's cap is 300; this case is about lost updates, not the cap
    store = notes.NoteStore.for_project(Path(root))
    for i in range(50):
        store.add("fact", f"worker {worker} note {i}")


def _memory_child(root: str, worker: int) -> None:
    from shiro_kernel.memory.named import MemoryStore

    MemoryStore.for_project(Path(root)).write("project", f"topic{worker}", f"content {worker}")


def _parallel(target, root: Path, n: int = 8) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=target, args=(str(root), w)) for w in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0


def test_eight_processes_remember_and_write_memories_lose_nothing(tmp_path):
    from shiro_kernel.memory.named import MemoryStore
    from shiro_kernel.memory.notes import NoteStore

    root = tmp_path / "project"
    root.mkdir()
    _parallel(_remember_child, root)
    texts = {e["text"] for e in NoteStore.for_project(root).entries()}
    lost = 400 - len(texts)
    assert lost == 0
    record("8 processes × 50 `remember`", 400, lost, "400 of 400 notes kept")
    _parallel(_memory_child, root)
    index = MemoryStore.for_project(root).index_text("project")
    lines = [line for line in index.splitlines() if line.startswith("- **topic")]
    assert len(lines) == 8
    record("8 parallel `memory_write`", 8, 8 - len(lines), "8 of 8 index lines")


# -- 3. provider faults --------------------------------------------------------------------------
def _tools():
    return {"python": all_tools()["inspect"]}  # a harmless tool under a familiar name


FAULTS: list[tuple[str, list[Any]]] = [
    ("429 then success", [Fault.status(429), Reply(text="ok")]),
    ("500 three times", [Fault.status(500), Fault.status(500), Fault.status(500)]),
    ("timeouts", [Fault.delay(1.0), Fault.delay(1.0), Fault.delay(1.0)]),
    ("stream cut mid-way", [Fault.cut(after_events=4), Reply(text="ok")]),
    ("malformed SSE", [Fault.malformed_sse(), Reply(text="ok")]),
    ("malformed SSE after text", [Fault.malformed_sse(after_events=6), Reply(text="ok")]),
]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_provider_faults_end_in_an_answer_or_a_clean_error(monkeypatch, fake_openai, tmp_path, api):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    outcomes = []
    for name, script in FAULTS:
        fake_openai.enqueue(*script)
        provider = Provider(
            ProviderSettings(model="gpt-4o-mini", api=api, base_url=fake_openai.base_url, max_retries=2, timeout_s=0.4)
        )
        session = Session()
        end = Turn(session, provider, _tools(), ToolContext(root=tmp_path), "", TurnOptions(approval="auto")).run(
            "hello"
        )
        assert end.reason in ("answered", "error"), name
        if end.error:
            assert "Traceback" not in end.error and KEY not in end.error and "\n" not in end.error
        assert session.messages[0].text == "hello" and consistent(session.messages)
        outcomes.append(end.reason)
        fake_openai._queue.clear()  # a reply a case did not need must not leak into the next one
    record(
        f"provider faults ({api}): 429, 500s, timeouts, cut stream, malformed SSE",
        len(FAULTS),
        0,
        f"{outcomes.count('answered')} answered, {outcomes.count('error')} clean errors",
    )


def test_history_rule_breaks_are_repaired_before_sending(monkeypatch, fake_openai, tmp_path):
    """Histories that would earn each real 400/404 are repaired by the validator or the 404 retry."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    broken = {
        "result without its call": [Message.user("q"), Message("tool", [ToolResultPart("call_x", "python", "1")])],
        "call without its result": [
            Message.user("q"),
            Message("assistant", [ToolCallPart("call_y", "python", "{}")]),
            Message.user("next"),
        ],
        "message without its reasoning": [
            Message.user("q"),
            Message("assistant", [TextPart("a", item_id="msg_orphan")]),
        ],
        "unknown stored id (404)": [Message.user("q"), Message("assistant", [TextPart("a", item_id="msg_gone")])],
    }
    for name, history in broken.items():
        fake_openai.enqueue(Reply(text="fine"))
        provider = Provider(ProviderSettings(model="gpt-4o-mini", base_url=fake_openai.base_url, max_retries=0))
        session = Session(messages=list(history))
        end = Turn(session, provider, _tools(), ToolContext(root=tmp_path), "", TurnOptions(approval="auto")).run(
            "go on"
        )
        assert end.reason == "answered", (name, end.error)
    statuses = [r.status for r in fake_openai.requests]
    record(
        "histories breaking each 400/404 rule",
        len(broken),
        0,
        f"{len(broken)} answered; statuses seen: {sorted(set(statuses))}",
    )


# -- 4. malformed tool calls ---------------------------------------------------------------------
def _junk(rng: random.Random) -> str:
    choice = rng.randrange(6)
    if choice == 0:
        return "{" + "".join(rng.choices(string.printable, k=rng.randint(0, 40)))
    if choice == 1:
        return json.dumps(rng.choice([[], 1, "x", None, True]))
    if choice == 2:
        return json.dumps({"path": rng.choice([1, None, [], {}]), "code": 5, "names": "df", "todos": "all"})
    if choice == 3:
        return json.dumps({"x" * rng.randint(1, 50): "y" * rng.randint(0, 200_000)})
    if choice == 4:
        return json.dumps({"path": "../" * rng.randint(1, 5) + "etc/passwd", "pattern": "(", "old": "", "new": ""})
    return "\x00" * rng.randint(0, 10)


def test_a_thousand_malformed_tool_calls_never_crash(tmp_path):
    rng = random.Random(7)
    tools = all_tools()
    names = [*tools, "no_such_tool", ""]
    errors, started = 0, time.perf_counter()
    ctx = ToolContext(root=tmp_path)
    for i in range(1000):
        call = ToolCallPart(f"call_{i}", rng.choice(names), _junk(rng))
        result = run_tool(tools, call, ctx)
        assert isinstance(result.output, str) and result.call_id == call.call_id
        errors += result.output.startswith("Error:")
    assert errors > 900  # nearly all are refused with a reason; none raised
    record(
        "malformed tool calls (bad JSON, wrong types, unknown tools, huge arguments)",
        1000,
        0,
        f"{errors} refused with `Error: …`, 0 crashes, {time.perf_counter() - started:.1f} s",
    )


# -- 5. escapes ------------------------------------------------------------------------------------
def test_path_and_name_escapes_are_refused_everywhere(tmp_path):
    from shiro_kernel.memory.named import MemoryStore

    root = tmp_path / "proj"
    root.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (root / "link").symlink_to(outside)
    tools = all_tools()
    memories = MemoryStore.for_project(root)
    ctx = ToolContext(root=root, memories=memories)
    attempts = {
        "read_file": [{"path": p} for p in ("../secret.txt", str(outside), "link", "~/x", "a/../../secret.txt")],
        "write_file": [{"path": p, "content": "x"} for p in ("../evil.txt", str(tmp_path / "evil2.txt"), "link")],
        "edit_file": [{"path": p, "old": "secret", "new": "x"} for p in ("../secret.txt", "link")],
        "grep": [{"pattern": "secret", "path": p} for p in ("..", str(tmp_path), "link")],
        "list_files": [{"pattern": p} for p in ("../*", "/*", str(tmp_path) + "/*", "*/../../*")],
        "memory_write": [{"scope": "project", "name": n, "content": "x"} for n in ("../x", "a/b", "..", "a\\b")],
        "memory_read": [{"name": n} for n in ("../x", "a/b", "..")],
    }
    refused = total = 0
    for name, argsets in attempts.items():
        for args in argsets:
            total += 1
            result = run_tool(tools, ToolCallPart("c", name, json.dumps(args)), ctx)
            ok = result.output.startswith("Error:") and "secret" not in result.output.replace("secret.txt", "")
            refused += ok
            assert ok, (name, args, result.output[:200])
    assert outside.read_text() == "secret" and not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "evil2.txt").exists()
    record("path and name escapes in every file or memory argument", total, total - refused, f"{refused} refused")


# -- 6. the key never lands anywhere ----------------------------------------------------------------
def test_the_api_key_appears_in_no_file_output_or_widget_state(fake_openai, tmp_path):
    from kernelutil import run_notebook

    fake_openai.enqueue(
        Reply(
            tool_calls=[
                Call("python", {"code": "import os; leaked = 'k' in os.environ; 1 + 1"}),
                Call("remember", {"kind": "fact", "text": "the answer is 2"}),
                Call("memory_write", {"scope": "project", "name": "facts", "content": "2"}),
                Call("todo_write", {"todos": [{"content": "answer", "status": "done"}]}),
            ]
        ),
        Reply(text="2"),
    )
    path = tmp_path / "secret.ipynb"
    nb = run_notebook(
        path,
        [
            "%load_ext shiro_kernel",
            '%config Shiro.approval = "auto"',
            "%shiro --wait what is 1+1?",
            "%shiro /save",
            "%shiro /sessions",
        ],
        {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o-mini"},
    )
    home = Path(os.environ["SHIRO_HOME"])
    files = [p for p in home.rglob("*") if p.is_file()] + [path]
    assert len(files) > 4  # a session record, notes, memories, history, the notebook
    leaks = [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert leaks == []
    assert KEY not in json.dumps(nb) and KEY not in json.dumps(nb.metadata.get("widgets", {}))
    record(
        "the API key in files under SHIRO_HOME, notebook outputs, widget state",
        len(files),
        len(leaks),
        f"0 occurrences in {len(files)} files",
    )


def test_corrupt_stores_are_kept_aside_not_overwritten(tmp_path):
    from shiro_kernel.memory.notes import NoteStore
    from shiro_kernel.store.history import PromptHistory

    root = tmp_path / "p"
    root.mkdir()
    notes = NoteStore.for_project(root)
    history = PromptHistory.for_project(root)
    for target in (notes.path, history.path):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("{not json")
    notes.add("fact", "after corruption")
    history.append("after corruption")
    kept = [p for p in tmp_path.rglob("*") if ".corrupt-" in p.name] + [
        p for p in Path(os.environ["SHIRO_HOME"]).rglob("*") if ".corrupt-" in p.name
    ]
    assert len(kept) == 2 and all(p.read_text() == "{not json" for p in kept)
    assert storage.read_json(notes.path)[0]["text"] == "after corruption"
    record("corrupt notes / history files", 2, 0, "both set aside as `.corrupt-<time>`, new data written")


# -- 7. two kernels, one notebook, one session -------------------------------------------------------
FOOTER = re.compile(r"Saved (\d+) messages?(?::[^\n·]*)? · resume: %shiro -c or %shiro -r ([0-9a-f-]+)")
SETUP = '%load_ext shiro_kernel\n%config Shiro.approval = "auto"'


def _model(request: Any) -> Reply:
    """The fake model of the multi-kernel cases: a python call for a new prompt, then an answer."""
    items = request.body.get("input") or request.body.get("messages") or []
    last = items[-1] if isinstance(items, list) and items else {}
    if isinstance(last, dict) and (last.get("type") == "function_call_output" or last.get("role") == "tool"):
        return Reply(text="done")
    return Reply(tool_calls=[Call("python", {"code": "1 + 1"})])


def _user_texts(record: dict[str, Any]) -> list[str]:
    return [
        p.get("text", "") for m in record["messages"] if m["role"] == "user" for p in m["parts"] if p["type"] == "text"
    ]


@dataclass
class _KernelRun:
    """One kernel's turns in a two-kernel trial: what it showed, its last footer, untrue footers seen."""

    name: str
    kernel: Any
    shown: list[str] = field(default_factory=list)
    footer: tuple[int, str] = (0, "")
    untrue: int = 0
    failure: BaseException | None = None


def _drive(run: _KernelRun, store: SessionStore, trial: int, turns: int) -> None:
    try:
        run.kernel.run(SETUP)
        for i in range(turns):
            prompt = f"trial {trial} kernel {run.name} turn {i}"
            out = run.kernel.run(f"%shiro --wait {prompt}")
            run.shown.append(out)
            found = FOOTER.findall(out)
            assert found, out[-2000:]
            run.footer = (int(found[-1][0]), found[-1][1])
            saved = store.load_record(store.resolve(run.footer[1]))  # what the footer says is saved, now
            run.untrue += len(saved["messages"]) < run.footer[0] or prompt not in _user_texts(saved)
    except BaseException as exc:  # reported by the test's thread
        run.failure = exc


@pytest.mark.timeout(600)
def test_two_kernels_on_one_notebook_lose_no_message_and_both_footers_are_true(fake_openai, tmp_path):
    from kernelutil import Kernel

    fake_openai.default_reply = _model
    trials, turns = 5, 4
    lost = false_footers = forks = 0
    started = time.perf_counter()
    for t in range(trials):
        home = tmp_path / f"home{t}"
        env = {
            "SHIRO_HOME": str(home),
            "OPENAI_API_KEY": KEY,
            "OPENAI_BASE_URL": fake_openai.base_url,
            "SHIRO_MODEL": "gpt-4o-mini",
            "JPY_SESSION_NAME": str(tmp_path / f"shared{t}.ipynb"),
        }
        seed = Kernel(env, cwd=str(tmp_path))  # an earlier kernel left a session for the notebook
        seed.run(SETUP)
        assert "Saved 4 messages" in seed.run(f"%shiro --wait seed of trial {t}")
        seed.close()
        runs = [_KernelRun(name, Kernel(env, cwd=str(tmp_path))) for name in "AB"]
        store = SessionStore(home / "sessions")
        threads = [threading.Thread(target=_drive, args=(run, store, t, turns)) for run in runs]
        for th in threads:
            th.start()
        for th in threads:
            th.join(300)
        for run in runs:
            run.kernel.close()
            if run.failure is not None:
                raise run.failure
        records = [json.loads(p.read_text()) for p in (home / "sessions").glob("*.json")]
        prompts = [text for r in records for text in _user_texts(r)]
        expected = [f"seed of trial {t}"] + [f"trial {t} kernel {r.name} turn {i}" for r in runs for i in range(turns)]
        lost += sum(1 for p in expected if p not in prompts)
        for run in runs:  # the last footer of each kernel: its record holds all of it
            n, short = run.footer
            final = next(r for r in records if r["id"].startswith(short))
            # the seed's turn and this kernel's own turns; the kernel that took a copy also holds the other's turns
            # made before its first (a copy is the session as it is then: under load the other may be turns ahead,
            # or in the middle of a turn whose first messages the write-ahead had saved), and its footer is true
            texts = _user_texts(final)
            own = [f"trial {t} kernel {run.name} turn {i}" for i in range(turns)]
            assert texts[0] == f"seed of trial {t}" and [x for x in texts if x in own] == own
            assert all(x.startswith(f"trial {t} kernel ") for x in texts[1:]) and n == len(final["messages"])
            assert 4 * (1 + turns) <= n <= 4 * len(texts)
            lost += max(0, n - len(final["messages"]))
            false_footers += run.untrue
            forks += "is open in another kernel" in "\n".join(run.shown)
    assert lost == 0 and false_footers == 0
    assert forks == trials  # in every trial exactly one kernel took the session and the other a copy
    record(
        "two kernels on one notebook (real kernels, concurrent turns)",
        trials,
        lost,
        f"2 kernels × {turns} turns each after a seed turn; {lost} messages lost, {false_footers} untrue footers; "
        f"the second kernel continued in a copy and said so in {forks} of {trials} trials; "
        f"{time.perf_counter() - started:.0f} s",
    )


# -- 8. secrets never leave the kernel ---------------------------------------------------------------
SECRETS = {
    "OPENAI_API_KEY": "sk-proj-LEAKCHECK0openai0key0A1b2C3d4E5f6G7h8",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYLEAKCHECKKEY",
    "HF_TOKEN": "hf_LEAKCHECKhuggingfaceTOKEN0123456789ab",
    "GITHUB_TOKEN": "ghp_LEAKCHECKgithubTOKEN0123456789abcdef",
}
# route -> the tool call that takes it (one call each, all in one step of one turn)
ROUTES: dict[str, tuple[str, dict[str, Any]]] = {
    "`env` via shell": ("shell", {"command": "env", "timeout_s": None}),
    "`print(os.environ)` via python": ("python", {"code": "import os\nprint(os.environ)"}),
    "read_file of a .env": ("read_file", {"path": ".env", "offset": None, "limit": None}),
    "grep for `sk-`": ("grep", {"pattern": "sk-|hf_|ghp_|wJalr", "path": None, "glob": None}),
    "inspect of a dict holding tokens": ("inspect", {"names": ["cfg"]}),
    "python last-value repr": ("python", {"code": "{k: os.environ[k] for k in sorted(os.environ) if k in NAMES}"}),
    "notebook output (notebook_read)": ("notebook_read", {}),
}


def _tool_args(tool: Any, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` restricted to what the tool takes now (optional arguments are nullable)."""
    props = tool.parameters.get("properties", {})
    return {k: v for k, v in args.items() if k in props} | {k: None for k in props if k not in args}


@pytest.mark.timeout(300)
def test_secrets_never_reach_the_model_the_record_or_the_notebook(fake_openai, tmp_path):
    import nbformat
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    tools = all_tools()
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".env").write_text("".join(f"{k}={v}\n" for k, v in SECRETS.items()))
    calls = [
        Call(name, _tool_args(tools[name], args), call_id=f"call_{i}") for i, (name, args) in enumerate(ROUTES.values())
    ]
    fake_openai.enqueue(Reply(text="Looking.", tool_calls=calls), Reply(text="I found nothing to show."))
    earlier = new_code_cell("# an earlier run printed the environment", execution_count=1)
    earlier.outputs = [new_output("stream", name="stdout", text="".join(f"{k}={v}\n" for k, v in SECRETS.items()))]
    nb = new_notebook(
        cells=[
            earlier,
            new_code_cell("%load_ext shiro_kernel\n%config Shiro.approval = 'auto'"),
            new_code_cell(
                f"import os\nNAMES = {sorted(SECRETS)!r}\ncfg = {{'user': 'me', **{{k: os.environ[k] for k in NAMES}}}}"
            ),
            new_code_cell("%shiro --wait show me the credentials this project uses"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = project / "creds.ipynb"
    nbformat.write(nb, path)  # notebook_read reads this file: the earlier run's output holds every secret
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(project)}})
    client.execute(
        env={
            **os.environ,
            **SECRETS,
            "OPENAI_BASE_URL": fake_openai.base_url,
            "SHIRO_MODEL": "gpt-4o-mini",
            "JPY_SESSION_NAME": str(path),
        }
    )
    nbformat.write(nb, path)

    home = Path(os.environ["SHIRO_HOME"])
    records = [json.loads(p.read_text()) for p in (home / "sessions").glob("*.json")]
    assert len(records) == 1
    results = {
        p["callId"]: p["output"] for m in records[0]["messages"] for p in m["parts"] if p["type"] == "tool_result"
    }
    sent = fake_openai.requests[-1].raw.decode()
    home_bytes = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    notebook = path.read_text()
    leaked = {"model": 0, "record": 0, "notebook": 0}
    shown = 0
    for i, route in enumerate(ROUTES):
        output = results[f"call_{i}"]
        assert not output.startswith("Error:"), (route, output[:300])
        for name, value in SECRETS.items():
            leaked["record"] += value in output
            leaked["model"] += any(value in r.raw.decode() for r in fake_openai.requests)
            shown += f"[redacted:{name}]" in output
    for value in SECRETS.values():
        leaked["record"] += value.encode() in home_bytes
        leaked["notebook"] += value in notebook
    assert "[redacted:OPENAI_API_KEY]" in sent
    assert "OPENAI_API_KEY" not in results["call_0"]  # the shell's environment has no API key at all
    # every route really carried every secret (so the test is not vacuous): shown redacted instead;
    # the API key is missing from `env` (3 secrets there)
    assert shown == len(ROUTES) * len(SECRETS) - 1
    assert leaked == {"model": 0, "record": 0, "notebook": 0}
    record(
        "secrets in tool results: 4 secrets × 7 routes (env, print(os.environ), read_file .env, grep, inspect, "
        "last-value repr, notebook output), real kernel via nbclient",
        len(ROUTES) * len(SECRETS),
        sum(leaked.values()),
        f"leaked to the model 0, to the session record 0, to the .ipynb 0; the model saw `[redacted:NAME]` "
        f"{shown} times (the API key is absent from the shell's environment)",
    )


# -- 9. the footer tells the truth about saving --------------------------------------------------------
def _turn(shell: Any, capsys: Any, prompt: str) -> str:
    shell.run_cell('%config Shiro.approval = "auto"')
    result = shell.run_cell(f"%shiro --wait {prompt}")
    out = capsys.readouterr()
    assert result.error_in_exec is None, result.error_in_exec
    return out.out + out.err


def _saved_claims(out: str) -> list[tuple[int, str]]:
    return [(int(n), short) for n, short in FOOTER.findall(out)]


def _on_disk(home: Path, short: str) -> int:
    """How many messages the record the footer names holds now (0 when there is none)."""
    for p in (home / "sessions").glob(f"{short}*.json"):
        return len(json.loads(p.read_text())["messages"])
    return 0


@pytest.mark.parametrize("case", ["read-only SHIRO_HOME", "SHIRO_HOME/sessions is a file"])
def test_an_unwritable_home_is_one_warning_the_turn_runs_and_no_footer_says_saved(
    shiro_shell, fake_openai, capsys, tmp_path, monkeypatch, case
):
    from fsutil import read_only

    fake_openai.default_reply = _model
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("SHIRO_HOME", str(home))
    if case.endswith("is a file"):
        (home / "sessions").write_text("not a folder\n")
    turns, answered, warnings, false_saved, tracebacks = 3, 0, 0, 0, 0
    outs = []
    with read_only(home) if case.startswith("read-only") else _nothing():
        for i in range(turns):
            out = _turn(shiro_shell, capsys, f"turn {i}")
            outs.append(out)
            answered += "done" in out
            warnings += out.count("could not save the session")
            false_saved += len(_saved_claims(out))
            tracebacks += "Traceback" in out
    assert answered == turns and warnings == turns and false_saved == 0 and tracebacks == 0, outs[-1]
    last = outs[-1]
    assert "Not saved:" in last and "point SHIRO_HOME at a writable folder" in last
    record(
        f"{case}: 3 turns",
        turns,
        false_saved,
        f"{answered}/{turns} turns answered; 1 save warning per turn (what failed, where, what to do); "
        f'footer "Not saved: …" every time, 0 false "Saved"; 0 tracebacks',
    )


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _mount_tmpfs(folder: Path, size: str) -> bool:
    import subprocess

    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
        ).returncode
        == 0
    )


def _big_model(request: Any) -> Reply:
    """Each turn's tool result is ~24 KB, so the record grows by that much a turn."""
    items = request.body.get("input") or request.body.get("messages") or []
    last = items[-1] if isinstance(items, list) and items else {}
    if isinstance(last, dict) and (last.get("type") == "function_call_output" or last.get("role") == "tool"):
        return Reply(text="done")
    return Reply(
        tool_calls=[Call("python", {"code": "import random\nprint(''.join(random.choices('abcdef', k=24000)))"})]
    )


@pytest.mark.timeout(300)
def test_a_full_disk_never_gets_a_false_saved_and_nothing_is_lost_once_there_is_room(
    shiro_shell, fake_openai, capsys, tmp_path, monkeypatch
):
    import subprocess

    home = tmp_path / "small"
    if not _mount_tmpfs(home, "1m"):
        pytest.skip("cannot mount a tmpfs here (needs root); the disk-full case is not simulated")
    try:
        fake_openai.default_reply = _big_model
        monkeypatch.setenv("SHIRO_HOME", str(home))
        filler = home / "filler"
        free = os.statvfs(home).f_bavail * os.statvfs(home).f_frsize
        filler.write_bytes(b"\0" * (free - 160_000))  # ~160 KB left: a few turns fit, then the disk is full
        turns, false_saved, failed_turns, answered = 8, 0, 0, 0
        for i in range(turns):
            out = _turn(shiro_shell, capsys, f"turn {i}")
            answered += "done" in out
            for n, short in _saved_claims(out):
                false_saved += _on_disk(home, short) < n  # "Saved n" while the record holds fewer
            if "could not save the session" in out:
                failed_turns += 1
                assert "No space left on device" in out and "Not saved:" in out
                assert out.count("could not save the session") == 1
        assert failed_turns >= 3 and false_saved == 0 and answered == turns
        filler.unlink()  # room again: the next turn saves everything the kernel kept
        out = _turn(shiro_shell, capsys, "after freeing space")
        ((n, short),) = _saved_claims(out)
        lost = 4 * (turns + 1) - _on_disk(home, short)
        assert n == 4 * (turns + 1) and lost == 0
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)
    record(
        "disk full (a real 1 MB tmpfs, ~160 KB free), 8 turns of ~24 KB each",
        turns,
        lost,
        f'{failed_turns} turns could not save: 1 warning each (No space left on device), footer "Not saved"; '
        f'{false_saved} false "Saved"; all {turns} turns answered; after freeing space the next turn saved all '
        f"{n} messages",
    )


def test_a_record_cut_short_is_set_aside_and_the_cell_says_so(shiro_shell, fake_openai, capsys, tmp_path):
    from shiro_kernel.store.short_ids import short_id

    home = Path(os.environ["SHIRO_HOME"])
    store = SessionStore(home / "sessions")
    cases = 0
    for style in ("in place", "by rename"):
        nb = str(tmp_path / f"cut {style}.ipynb")
        shiro_shell.user_ns["__session__"] = nb
        older = Session(notebook_path=nb, messages=[Message.user(f"older {style}")])
        store.save(older, model="m")
        newest = Session(
            notebook_path=nb, messages=[Message.user(f"newest {style}"), Message("assistant", [TextPart("x" * 500)])]
        )
        store.save(newest, model="m")
        path = store.path_for(newest.id)
        cut_short(path, style)
        shiro_shell.run_cell("%unload_ext shiro_kernel")
        shiro_shell.run_cell("%load_ext shiro_kernel")  # a new kernel for this notebook
        capsys.readouterr()
        out = _turn(shiro_shell, capsys, "where were we?")
        assert f"session {short_id(newest.id)} could not be read" in out and ".corrupt-" in out, out
        assert f"resumed {short_id(older.id)}" in out, out  # the newest readable one is resumed instead
        assert list(path.parent.glob(f"{path.name}.corrupt-*")) and not path.exists()
        shiro_shell.run_cell("%shiro /sessions")
        listed = capsys.readouterr().out
        assert short_id(newest.id) not in listed and short_id(older.id) in listed
        cases += 1
    record(
        "a session record cut short mid-JSON (in place, and renamed over)",
        cases,
        0,
        "set aside as `.corrupt-<time>`, dropped from the index and `/sessions`, the cell says which and where; "
        "the newest readable session is resumed",
    )


def test_two_sessions_started_in_the_same_minute_resolve_uniquely_from_the_footer(shiro_shell, fake_openai, capsys):
    fake_openai.default_reply = _model
    home = Path(os.environ["SHIRO_HOME"])
    trials, ambiguous = 20, 0
    shown: list[str] = []
    for i in range(trials):
        out = _turn(shiro_shell, capsys, f"--new session {i}")
        ((_, short),) = _saved_claims(out)
        shown.append(short)
    store = SessionStore(home / "sessions")
    ids = [store.resolve(short) for short in shown]  # raises Ambiguous if one is not unique
    assert len(set(ids)) == trials and all(i.startswith(s) for i, s in zip(ids, shown, strict=True))
    assert len({s[:8] for s in shown}) < trials  # they did share the timestamp's first 8 digits
    record(
        f"{trials} sessions started within the same minute",
        trials,
        ambiguous,
        f"every footer's `%shiro -r <id>` ({len(shown[0])} characters) resolves to its own session",
    )


# -- 10. bounded memory: inspect never builds an unbounded string --------------------------------------
RSS_CHILD = """
import resource, sys, time
from shiro_kernel.tools import ToolContext, all_tools, run_tool
from shiro_kernel.transcript import ToolCallPart

class Shell:
    user_ns = {}
    user_ns_hidden = {}

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux

kind = sys.argv[1]
if kind == "bytes":
    value = b"x" * 200_000_000
elif kind == "list":
    value = [str(i) for i in range(3_000_000)]
elif kind == "str":
    value = "y" * 200_000_000
else:
    import numpy, pandas
    value = pandas.DataFrame(numpy.zeros((3_000_000, 8)), columns=[f"c{i}" for i in range(8)])
    value["s"] = "text " * 40
Shell.user_ns["value"] = value
before = peak_mb()
started = time.perf_counter()
result = run_tool(all_tools(), ToolCallPart("c", "inspect", '{"names": ["value"]}'), ToolContext(root=".", shell=Shell()))
print(round(peak_mb() - before, 1), round(before), len(result.output), round(time.perf_counter() - started, 3))
"""


@pytest.mark.timeout(300)
def test_inspect_of_huge_values_keeps_memory_and_output_bounded():
    import subprocess
    import sys

    growth: dict[str, float] = {}
    for kind in ("bytes", "str", "list", "DataFrame"):
        done = subprocess.run([sys.executable, "-c", RSS_CHILD, kind], capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
        extra_mb, base_mb, chars, seconds = done.stdout.split()
        growth[kind] = float(extra_mb)
        assert int(chars) < 3_000 and float(seconds) < 5
    assert max(growth.values()) < 50, growth
    record(
        "`inspect` of a 200 MB bytes, a 200 MB str, a 3M-item list, a 3M-row DataFrame",
        len(growth),
        0,
        "peak RSS growth during the call: "
        + ", ".join(f"{k} {v:g} MB" for k, v in growth.items())
        + "; each result under 3,000 characters",
    )


# -- names that would forge index lines; files that never end --------------------------------------------
def test_memory_names_that_would_forge_an_index_line_are_refused(tmp_path):
    from shiro_kernel.memory.named import MemoryStore

    root = tmp_path / "proj"
    root.mkdir()
    memories = MemoryStore.for_project(root)
    ctx = ToolContext(root=root, memories=memories)
    tools = all_tools()
    run_tool(
        tools,
        ToolCallPart("ok", "memory_write", json.dumps({"scope": "project", "name": "facts", "content": "1"})),
        ctx,
    )
    index_before = memories.index_text("project")
    bad = [
        "x\n- **forged** · project · 2026-01-01 · 1",
        ".",
        ".hidden",
        "a" * 250,
        "tab\there",
        "bell\x07",
        "line\u2028sep",
    ]
    refused = 0
    for name in bad:
        result = run_tool(
            tools,
            ToolCallPart("c", "memory_write", json.dumps({"scope": "project", "name": name, "content": "x"})),
            ctx,
        )
        assert result.is_error and result.output.startswith("Error: invalid memory name"), (name, result.output)
        assert "OSError" not in result.output and "Traceback" not in result.output
        refused += 1
    assert memories.index_text("project") == index_before and "forged" not in index_before
    record(
        "memory names with a newline, control characters, `.`, a leading dot, 250 characters",
        len(bad),
        len(bad) - refused,
        f"{refused} refused with the seed-style `invalid memory name` error; index.md unchanged; no OSError",
    )


def test_file_tools_on_fifos_return_at_once_and_the_next_call_works(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "data.txt").write_text("needle\n")
    os.mkfifo(root / "pipe")
    os.mkfifo(root / "sub.fifo")
    ctx = ToolContext(root=root)
    calls = [
        ("read_file", {"path": "pipe"}),
        ("grep", {"pattern": "needle"}),
        ("grep", {"pattern": "needle", "path": "pipe"}),
        ("list_files", {"pattern": "*"}),
        ("read_file", {"path": "data.txt"}),
    ]
    outputs: list[str] = []
    started = time.monotonic()

    def run_all() -> None:
        for name, args in calls:
            outputs.append(run_tool(all_tools(), ToolCallPart("c", name, json.dumps(args)), ctx).output)

    worker = threading.Thread(target=run_all, daemon=True)
    worker.start()
    worker.join(10)
    elapsed = time.monotonic() - started
    hung = int(worker.is_alive())
    assert not hung, "a file tool blocked on a FIFO"
    assert outputs == [
        "Error: pipe is not a regular file (a pipe, device or socket); it cannot be read",
        "data.txt:1: needle",  # the FIFOs are skipped, never opened
        "No matches for 'needle' in pipe.",
        "data.txt\npipe\nsub.fifo",  # listed, not opened
        "     1\tneedle\n[data.txt: 1 lines]",  # the next call works
    ]
    record(
        "`read_file` / `grep` / `list_files` on FIFOs, then an ordinary call",
        len(calls),
        hung,
        f"all returned in {elapsed * 1000:.0f} ms (FIFOs refused or skipped); the next call worked",
    )
