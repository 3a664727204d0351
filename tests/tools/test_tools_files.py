"""File tools on real temporary folders: read_file, write_file, edit_file, list_files, grep."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from shiro_kernel.tools import ToolContext, ToolError, all_tools, run_tool
from shiro_kernel.tools.base import ToolOutput
from shiro_kernel.tools.files import MAX_LIST, MAX_MATCHES
from shiro_kernel.transcript import ToolCallPart


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "src" / "pkg").mkdir(parents=True)
    (project / "src" / "pkg" / "mod.py").write_text("def add(a, b):\n    return a + b\n\nTOTAL = add(1, 2)\n")
    (project / "src" / "main.py").write_text("from pkg.mod import add\nprint(add(2, 3))\n")
    (project / "notes.md").write_text("# Notes\nTODO: write more\n")
    (project / "data.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    for skipped in (".git", "node_modules", "__pycache__", ".venv"):
        (project / skipped).mkdir()
        (project / skipped / "hidden.py").write_text("TODO: hidden\n")
    (tmp_path / "outside.txt").write_text("secret TODO\n")
    (tmp_path / "outside_dir").mkdir()
    (tmp_path / "outside_dir" / "leak.py").write_text("TODO leak\n")
    return project


@pytest.fixture
def ctx(root: Path) -> ToolContext:
    return ToolContext(root=root)


def run(ctx: ToolContext, name: str, **args) -> str:
    tool = all_tools()[name]
    full = {key: None for key in tool.parameters["properties"]}
    full.update(args)
    out = tool.run(full, ctx)
    return out.text if isinstance(out, ToolOutput) else out  # read_file's text (its meta is the ledger's)


def call(ctx: ToolContext, name: str, arguments) -> str:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return run_tool(all_tools(), ToolCallPart("c1", name, text), ctx).output


# -- read_file -----------------------------------------------------------------------------------
def test_read_file_numbers_lines_like_cat_n(ctx):
    out = run(ctx, "read_file", path="src/pkg/mod.py")
    assert out.splitlines() == [
        "     1\tdef add(a, b):",
        "     2\t    return a + b",
        "     3\t",
        "     4\tTOTAL = add(1, 2)",
        "[src/pkg/mod.py: 4 lines]",
    ]


def test_read_file_offset_limit_and_how_to_read_more(ctx, root):
    (root / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 3001)))
    out = run(ctx, "read_file", path="long.txt")
    assert out.splitlines()[0] == "     1\tline 1" and out.splitlines()[-2] == "  2000\tline 2000"
    assert out.splitlines()[-1] == "[long.txt: lines 1-2000 of 3000; to read more, call read_file with offset=2001]"
    out = run(ctx, "read_file", path="long.txt", offset=2999, limit=10)
    assert out.splitlines() == ["  2999\tline 2999", "  3000\tline 3000", "[long.txt: lines 2999-3000 of 3000]"]
    out = run(ctx, "read_file", path="long.txt", offset=10, limit=2)
    assert out.splitlines()[-1] == "[long.txt: lines 10-11 of 3000; to read more, call read_file with offset=12]"


def test_read_file_long_lines_are_cut(ctx, root):
    (root / "wide.txt").write_text("x" * 10_000 + "\nshort\n")
    out = run(ctx, "read_file", path="wide.txt")
    assert "[line cut: 10000 chars]" in out and len(out) < 2_200


def test_read_file_errors(ctx, root):
    (root / "empty.txt").write_text("")
    assert run(ctx, "read_file", path="empty.txt") == "empty.txt is empty (0 lines)."
    with pytest.raises(ToolError, match="binary file"):
        run(ctx, "read_file", path="data.bin")
    with pytest.raises(ToolError, match="does not exist; use list_files"):
        run(ctx, "read_file", path="missing.txt")
    with pytest.raises(ToolError, match="is a folder"):
        run(ctx, "read_file", path="src")
    with pytest.raises(ToolError, match="offset 99 is past the end of notes.md, which has 2 lines"):
        run(ctx, "read_file", path="notes.md", offset=99)
    with pytest.raises(ToolError, match="offset must be at least 1"):
        run(ctx, "read_file", path="notes.md", offset=0)
    with pytest.raises(ToolError, match="limit must be at least 1"):
        run(ctx, "read_file", path="notes.md", limit=0)


# -- escapes: every path-taking tool -------------------------------------------------------------
@pytest.fixture
def links(root: Path, tmp_path: Path) -> None:
    (root / "link_out.txt").symlink_to(tmp_path / "outside.txt")
    (root / "link_dir").symlink_to(tmp_path / "outside_dir")


ESCAPES = ["../outside.txt", "/etc/passwd", "~/x", "src/../../outside.txt", "link_out.txt", "link_dir/leak.py"]


@pytest.mark.parametrize("path", ESCAPES)
def test_every_path_tool_refuses_escapes(ctx, links, tmp_path, path):
    before = (tmp_path / "outside.txt").read_text()
    for name, args in [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "x"}),
        ("edit_file", {"path": path, "old": "secret", "new": "public"}),
        ("grep", {"pattern": "TODO", "path": path}),
    ]:
        out = call(ctx, name, {**{k: None for k in all_tools()[name].parameters["properties"]}, **args})
        assert out.startswith("Error: path") and "outside the project root" in out, (name, out)
    assert (tmp_path / "outside.txt").read_text() == before
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "pattern,path",
    [
        ("../*", ".."),
        ("../**/*.txt", ".."),
        ("/etc/*", "/etc"),
        ("/*", "/"),
        ("src/../../*", "src/../.."),
        ("~/*", "~"),
    ],
)
def test_list_files_refuses_escapes(ctx, pattern, path):
    out = call(ctx, "list_files", {"pattern": pattern})
    assert out == f"Error: path '{path}' is outside the project root {ctx.root}; only files under it can be used"


def test_list_files_refuses_dot_dot_after_a_wildcard(ctx):
    assert call(ctx, "list_files", {"pattern": "*/../../*"}) == (
        "Error: the pattern may not contain '..' after a wildcard; patterns are relative to the project root"
    )


def test_symlinks_out_of_the_root_are_not_listed_or_searched(ctx, links):
    assert "link" not in run(ctx, "list_files", pattern="**/*")
    assert "leak" not in run(ctx, "grep", pattern="TODO")
    assert "secret" not in run(ctx, "grep", pattern="TODO")


def test_absolute_paths_inside_the_root_are_fine(ctx, root):
    assert "TODO: write more" in run(ctx, "read_file", path=str(root / "notes.md"))
    assert run(ctx, "list_files", pattern=str(root / "src" / "*.py")) == "src/main.py"


# -- write_file ----------------------------------------------------------------------------------
def test_write_file_creates_folders_and_reports_bytes(ctx, root):
    out = run(ctx, "write_file", path="new/deep/file.txt", content="héllo\nworld\n")
    assert out == "Wrote 13 bytes (2 lines) to new/deep/file.txt (new file)."
    assert (root / "new/deep/file.txt").read_text(encoding="utf-8") == "héllo\nworld\n"
    mode = stat.S_IMODE((root / "new/deep/file.txt").stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # not the 0600 of a temp file


def test_write_file_replaces_atomically_and_keeps_mode(ctx, root):
    script = root / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o755)
    out = run(ctx, "write_file", path="run.sh", content="echo new\n")
    assert out.endswith("(replaced).")
    assert script.read_text() == "echo new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert sorted(p.name for p in root.iterdir() if p.name.endswith(".tmp")) == []  # no temp file left
    assert run(ctx, "write_file", path="blank.txt", content="") == "Wrote 0 bytes (0 lines) to blank.txt (new file)."


def test_write_file_errors(ctx):
    with pytest.raises(ToolError, match="is a folder"):
        run(ctx, "write_file", path="src", content="x")
    with pytest.raises(ToolError, match="a part of its folder path is a file"):
        run(ctx, "write_file", path="notes.md/inner.txt", content="x")
    assert call(ctx, "write_file", {"path": "a.txt"}).startswith("Error: missing required argument 'content'")
    assert call(ctx, "write_file", {"path": "a.txt", "content": 5}).startswith("Error: argument 'content' must be")


# -- edit_file -----------------------------------------------------------------------------------
def test_edit_file_replaces_exactly_one_match(ctx, root):
    out = run(ctx, "edit_file", path="src/pkg/mod.py", old="return a + b", new="return a + b + 0")
    assert out.startswith("Edited src/pkg/mod.py: replaced 1 occurrence at line 2.")
    assert "     2\t    return a + b + 0" in out
    assert (root / "src/pkg/mod.py").read_text().splitlines()[1] == "    return a + b + 0"


def test_edit_file_zero_and_many_matches(ctx, root):
    with pytest.raises(ToolError, match=r"old text not found in src/pkg/mod.py \(0 matches\)"):
        run(ctx, "edit_file", path="src/pkg/mod.py", old="return a - b", new="x")
    with pytest.raises(ToolError, match="old text occurs 2 times in src/pkg/mod.py; include more"):
        run(ctx, "edit_file", path="src/pkg/mod.py", old="add(", new="plus(")
    assert "add(1, 2)" in (root / "src/pkg/mod.py").read_text()  # unchanged


def test_edit_file_other_errors(ctx):
    with pytest.raises(ToolError, match="identical"):
        run(ctx, "edit_file", path="notes.md", old="TODO", new="TODO")
    with pytest.raises(ToolError, match="old is empty"):
        run(ctx, "edit_file", path="notes.md", old="", new="x")
    with pytest.raises(ToolError, match="does not exist"):
        run(ctx, "edit_file", path="nope.md", old="a", new="b")
    with pytest.raises(ToolError, match="binary file"):
        run(ctx, "edit_file", path="data.bin", old="binary", new="text")
    with pytest.raises(ToolError, match="is a folder"):
        run(ctx, "edit_file", path="src", old="a", new="b")


def test_edit_file_keeps_windows_line_endings(ctx, root):
    (root / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    run(ctx, "edit_file", path="win.txt", old="one\ntwo", new="uno\ndos")
    assert (root / "win.txt").read_bytes() == b"uno\r\ndos\r\nthree\r\n"


# -- list_files ----------------------------------------------------------------------------------
def test_list_files_globs(ctx):
    assert run(ctx, "list_files", pattern="**/*.py").splitlines() == ["src/main.py", "src/pkg/mod.py"]
    assert run(ctx, "list_files", pattern="*").splitlines() == ["data.bin", "notes.md", "src/"]
    assert run(ctx, "list_files", pattern="src/*.py") == "src/main.py"
    assert run(ctx, "list_files", pattern="src/**/*.py").splitlines() == ["src/main.py", "src/pkg/mod.py"]
    assert run(ctx, "list_files", pattern="*/pkg/m?d.[p]y") == "src/pkg/mod.py"
    assert run(ctx, "list_files", pattern="notes.md") == "notes.md"
    assert run(ctx, "list_files", pattern="src").splitlines() == [
        "(src is a folder; listing what it holds)",
        "src/main.py",
        "src/pkg/",
    ]
    assert run(ctx, "list_files", pattern="*.csv") == "No files match '*.csv'."
    assert run(ctx, "list_files", pattern="missing/x.py").startswith("No files match")


def test_list_files_skips_tool_folders_unless_asked(ctx):
    everything = run(ctx, "list_files", pattern="**")
    assert "hidden.py" not in everything and ".git" not in everything and "node_modules" not in everything
    assert run(ctx, "list_files", pattern=".venv/*.py") == ".venv/hidden.py"


def test_list_files_is_capped(ctx, root):
    (root / "many").mkdir()
    for i in range(MAX_LIST + 20):
        (root / "many" / f"f{i:04d}.txt").write_text("")
    out = run(ctx, "list_files", pattern="many/*.txt").splitlines()
    assert len(out) == MAX_LIST + 1
    assert out[0] == "many/f0000.txt"
    assert out[-1] == f"[{MAX_LIST + 20} matches; showing the first {MAX_LIST} — narrow the pattern to see the rest]"
    assert call(ctx, "list_files", {"pattern": ""}).startswith("Error: pattern is empty")


# -- grep ----------------------------------------------------------------------------------------
def test_grep_finds_lines_and_skips_binary_and_tool_folders(ctx):
    out = run(ctx, "grep", pattern=r"add\(")
    assert out.splitlines() == [
        "src/main.py:2: print(add(2, 3))",
        "src/pkg/mod.py:1: def add(a, b):",
        "src/pkg/mod.py:4: TOTAL = add(1, 2)",
    ]
    assert run(ctx, "grep", pattern="TODO") == "notes.md:2: TODO: write more"
    assert run(ctx, "grep", pattern="binary") == "No matches for 'binary' in the project root."


def test_grep_path_file_or_folder(ctx):
    assert (
        run(ctx, "grep", pattern="add", path="src/main.py") == "src/main.py:1: from pkg.mod import add\n"
        "src/main.py:2: print(add(2, 3))"
    )
    assert run(ctx, "grep", pattern="(?i)total", path="src/pkg") == "src/pkg/mod.py:4: TOTAL = add(1, 2)"
    assert run(ctx, "grep", pattern="hidden", path=".git") == ".git/hidden.py:1: TODO: hidden"


def test_grep_errors_and_cap(ctx, root):
    with pytest.raises(ToolError, match=r"invalid regular expression 'add\(': missing \), unterminated"):
        run(ctx, "grep", pattern="add(")
    with pytest.raises(ToolError, match="does not exist"):
        run(ctx, "grep", pattern="x", path="nope")
    with pytest.raises(ToolError, match="binary file"):
        run(ctx, "grep", pattern="x", path="data.bin")
    (root / "big.txt").write_text("hit\n" * (MAX_MATCHES + 50))
    out = run(ctx, "grep", pattern="hit").splitlines()
    assert len(out) == MAX_MATCHES + 1 and out[-1].startswith(f"[stopped after {MAX_MATCHES} matches")


# -- the registry ----------------------------------------------------------------------------------
def test_registry_errors(ctx):
    unknown = call(ctx, "read_files", {"path": "x"})
    assert unknown.startswith("Error: unknown tool 'read_files'; available: ") and ", read_file, " in unknown
    assert call(ctx, "read_file", "{not json").startswith("Error: arguments are not valid JSON")
    assert call(ctx, "read_file", "[1]").startswith("Error: arguments must be a JSON object")
    assert call(ctx, "read_file", {"path": "notes.md", "offset": "2"}).startswith(
        "Error: argument 'offset' must be integer"
    )
    assert call(ctx, "read_file", {"path": 3}).startswith("Error: argument 'path' must be string")
    assert call(ctx, "read_file", {"path": "notes.md", "lines": 3}).startswith("Error: unknown argument(s) lines")
    assert call(ctx, "read_file", {"path": "notes.md", "offset": None, "limit": None}).startswith("     1\t# Notes")
    assert call(ctx, "read_file", {"path": "notes.md"}).startswith("     1\t# Notes")  # optional keys may be absent


def test_schemas_are_strict(ctx):
    import jsonschema

    for tool in all_tools().values():
        params = tool.parameters
        jsonschema.Draft202012Validator.check_schema(params)
        for prop in params["properties"].values():
            assert prop.get("description")
            if "array" in prop["type"]:
                assert "items" in prop
        assert params["additionalProperties"] is False
        assert params["required"] == list(params["properties"])
        assert tool.description and len(tool.description) < 600  # the seed's todo_write text is 431
    asking = {name for name, tool in all_tools().items() if tool.needs_approval}
    assert asking == {
        "python",
        "write_file",
        "edit_file",
        "shell",
        "remember",
        "forget",
        "memory_write",
        "notebook_check",
        "notebook_run",
    }
    # the cell changes ask in the notebook itself (a diff with Accept / Reject): reviewed, not asked before
    reviewed = {name for name, tool in all_tools().items() if tool.reviewed}
    assert reviewed == {"notebook_edit", "notebook_insert", "notebook_delete", "propose_cell"}
