"""The task list and todo_write (seed test/todo.test.ts, test/notebook.test.ts, checklist §1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shiro_kernel.tasks import TaskList
from shiro_kernel.tools import ToolContext, run_tool
from shiro_kernel.tools.tasks_tool import DESCRIPTION, TOOLS, todo_write
from shiro_kernel.transcript import ToolCallPart

FOUR = [
    {"content": "read the pagination code", "status": "done"},
    {"content": "fix the boundary", "status": "in_progress"},
    {"content": "add a test", "status": "pending"},
    {"content": "update the docs", "status": "blocked", "note": "no write access to the wiki"},
]


def call(tasks: TaskList | None, todos: object) -> tuple[str, bool]:
    ctx = ToolContext(root=Path.cwd(), tasks=tasks)
    part = ToolCallPart("c1", "todo_write", json.dumps({"todos": todos}))
    result = run_tool({t.name: t for t in TOOLS}, part, ctx)
    return result.output, result.is_error


def test_schema_and_description_are_the_seeds() -> None:
    assert todo_write.name == "todo_write" and not todo_write.changes
    assert DESCRIPTION.startswith("Record or update your task list for a multi-step job. Send the whole list")
    assert DESCRIPTION.endswith("Skip it entirely for single-step work.")
    todos = todo_write.parameters["properties"]["todos"]
    assert todo_write.parameters["required"] == ["todos"]
    assert todos["description"] == "The complete list, in the order you will do them"
    item = todos["items"]["properties"]
    assert item["content"]["description"] == (
        'One concrete action with a verifiable outcome, e.g. "add limit/offset to listUsers()"'
    )
    assert item["status"]["enum"] == ["pending", "in_progress", "done", "blocked"]
    assert item["note"]["description"] == (
        "Required for blocked: what is blocking it. Otherwise a short finding worth keeping."
    )
    assert item["note"]["type"] == ["string", "null"]


def test_render_markers_and_note() -> None:
    tasks = TaskList()
    tasks.replace(FOUR)
    assert tasks.render_lines() == [
        "[x] read the pagination code",
        "[~] fix the boundary",
        "[ ] add a test",
        "[!] update the docs  (no write access to the wiki)",
    ]
    assert len({line[:3] for line in tasks.render_lines()}) == 4


def test_tool_result_text_and_replaces_rather_than_appends() -> None:
    tasks = TaskList()
    out, err = call(tasks, FOUR)
    assert not err
    assert out == (
        "Task list updated: 1/4 done.\n[x] read the pagination code\n[~] fix the boundary\n"
        "[ ] add a test\n[!] update the docs  (no write access to the wiki)"
    )
    out, _ = call(tasks, [{"content": "only one", "status": "in_progress", "note": None}])
    assert tasks.state() == [{"content": "only one", "status": "in_progress"}]
    assert out == "Task list updated: 0/1 done.\n[~] only one"


def test_warnings_exact_texts() -> None:
    tasks = TaskList()
    out, _ = call(tasks, [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}])
    assert out.endswith("\nWarning: 2 tasks are in_progress; keep it to one.")
    out, _ = call(tasks, [{"content": "a", "status": "pending"}, {"content": "b", "status": "done"}])
    assert out.endswith("\nWarning: nothing is in_progress; mark what you are working on.")
    out, _ = call(tasks, [{"content": "a", "status": "blocked", "note": "  "}, {"content": "b", "status": "done"}])
    assert out.endswith('\nWarning: "a" is blocked with no note saying why.')
    # warnings are joined by spaces on one line
    out, _ = call(tasks, [{"content": "a", "status": "blocked"}, {"content": "b", "status": "pending"}])
    assert out.splitlines()[-1] == (
        'Warning: nothing is in_progress; mark what you are working on. "a" is blocked with no note saying why.'
    )


def test_no_warning_when_all_done_or_all_blocked() -> None:
    tasks = TaskList()
    out, _ = call(tasks, [{"content": "a", "status": "done"}, {"content": "b", "status": "done"}])
    assert out == "Task list updated: 2/2 done.\n[x] a\n[x] b"  # no warning line
    out, _ = call(tasks, [{"content": "a", "status": "blocked", "note": "x"}, {"content": "b", "status": "done"}])
    assert out == "Task list updated: 1/2 done.\n[!] a  (x)\n[x] b"
    out, _ = call(tasks, [])
    assert out == "Task list updated: 0/0 done."


def test_missing_list_and_bad_items_are_errors() -> None:
    out, err = call(None, FOUR)
    assert err and out == "Error: the task list is not available here"
    tasks = TaskList()
    out, err = call(tasks, [{"content": "a", "status": "later"}])
    assert err and out.startswith("Error: todos item 1: status must be one of pending, in_progress, done, blocked")
    out, err = call(tasks, [{"content": 3, "status": "done"}])
    assert err and out == "Error: todos item 1: content must be a string"
    out, err = call(tasks, [{"status": "done"}])
    assert err and out == "Error: todos item 1: content must be a string"
    out, err = call(tasks, [{"content": "a", "status": "done", "note": 1}])
    assert err and out == "Error: todos item 1: note must be a string"
    out, err = call(tasks, [{"content": "a", "status": "done", "owner": "me"}])
    assert err and out.startswith("Error: todos item 1 has unknown field(s) owner")
    assert tasks.state() == []


def test_empty_content_is_a_task_as_in_the_seed() -> None:
    """The seed's schema only asks for a string (issue 29, point 13)."""
    tasks = TaskList()
    out, err = call(tasks, [{"content": "", "status": "in_progress"}, {"content": "   ", "status": "pending"}])
    assert not err and out == "Task list updated: 0/2 done.\n[~] \n[ ]    "
    assert tasks.state() == [{"content": "", "status": "in_progress"}, {"content": "   ", "status": "pending"}]


def test_prompt_block_exact() -> None:
    tasks = TaskList()
    assert tasks.render_prompt_block() == ""
    tasks.replace(FOUR)
    assert tasks.render_prompt_block() == (
        "\nYour task list (1/4 done, 1 blocked). Keep it current with todo_write:\n"
        "[x] read the pagination code\n[~] fix the boundary\n[ ] add a test\n"
        "[!] update the docs  (no write access to the wiki)"
    )
    tasks.replace(FOUR[:2])
    assert tasks.render_prompt_block().startswith("\nYour task list (1/2 done). Keep it current with todo_write:\n")


def test_progress_bar() -> None:
    tasks = TaskList()
    assert tasks.progress_bar() == ""
    tasks.replace(FOUR)
    assert tasks.progress_bar() == "tasks " + "#" * 10 + "." * 30 + " 1/4  1 blocked"
    tasks.replace(FOUR[:3])
    assert tasks.progress_bar() == "tasks " + "#" * 13 + "." * 27 + " 1/3"
    assert tasks.render().splitlines()[0] == tasks.progress_bar()
    assert TaskList().render() == "no tasks"


def test_rounding_is_the_seeds_half_up() -> None:
    """The seed's ``Math.round`` rounds .5 up, Python's ``round`` to even (issue 29, point 12): 1/16 done is
    2.5 of 40 and draws 3 ``#``; 3/16 (7.5) draws 8 either way; a context 0.5 % full shows 1 %."""
    from shiro_kernel.context.estimate import percent

    def bar(done: int, total: int) -> str:
        tasks = TaskList()
        tasks.replace([{"content": f"t{i}", "status": "done" if i < done else "pending"} for i in range(total)])
        return tasks.progress_bar()

    assert bar(1, 16) == "tasks " + "#" * 3 + "." * 37 + " 1/16"
    assert bar(3, 16) == "tasks " + "#" * 8 + "." * 32 + " 3/16"
    assert bar(5, 16) == "tasks " + "#" * 13 + "." * 27 + " 5/16"  # 12.5 -> 13 (to even: 12)
    assert bar(16, 16) == "tasks " + "#" * 40 + " 16/16"
    assert percent(600, 120_000) == 1  # 0.5 %
    assert percent(3_000, 120_000) == 3  # 2.5 %
    assert percent(599, 120_000) == 0
    assert percent(0, 120_000) == 0 and percent(500_000, 120_000) == 100


def test_state_is_a_deep_copy_and_on_change_fires() -> None:
    tasks = TaskList()
    seen: list[int] = []
    tasks.on_change.append(lambda t: seen.append(len(t)))
    tasks.replace(FOUR[:1])
    tasks.replace(FOUR[:2])
    assert seen == [1, 2]
    state = tasks.state()
    state[0]["content"] = "changed"
    state.append({"content": "x", "status": "done"})
    assert tasks.state()[0]["content"] == "read the pagination code" and len(tasks) == 2
    tasks.clear()
    assert tasks.state() == [] and seen == [1, 2, 0]


def test_restore_drops_junk() -> None:
    tasks = TaskList()
    tasks.replace(FOUR[:1])
    tasks.restore(None)
    assert len(tasks) == 1
    tasks.restore(
        [
            {"content": "ok", "status": "pending"},
            {"content": 3, "status": "done"},
            {"content": "bad", "status": "later"},
            None,
            "junk",
            {"content": "n", "status": "blocked", "note": "why"},
        ]
    )
    assert tasks.state() == [
        {"content": "ok", "status": "pending"},
        {"content": "n", "status": "blocked", "note": "why"},
    ]
    with pytest.raises(ValueError):
        tasks.replace([{"content": "x", "status": "nope"}])
