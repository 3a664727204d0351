"""``memory_write`` beyond a plain write (issue 17): the path it returns works with the file tools,
``remove: true``, the index-size note and the fallback (alias) overlay key. Strings are samagotchi's
(``tools/memory.rb``, ``memory_bundle/index_size.rb``, docs/memory.md)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from shiro_kernel.errors import MemoryRefused
from shiro_kernel.memory.index_file import INDEX_WARN_TOKENS, crossing_note, index_tokens
from shiro_kernel.memory.named import MemoryStore
from shiro_kernel.tools import all_tools, run_tool
from shiro_kernel.tools.base import ToolContext
from shiro_kernel.tools.memory_tools import memory_write
from shiro_kernel.transcript import ToolCallPart

SEP = "\n\n---\n\n"
NOTE = (
    "Note: the {scope} memory index is now ~{tokens} tokens (over memory.index_warn_tokens {limit}) and is sent "
    "with every prompt. When you next have a moment, tighten long index descriptions (memory_write with name, "
    "scope and description only). Don't remove or merge memories unless the user asks."
)


def said(fn: Any, *args: Any, **kwargs: Any) -> str:
    """What the model reads: the result, or ``Error: <sentence>`` for a refusal."""
    try:
        return str(fn(*args, **kwargs))
    except MemoryRefused as exc:
        return f"Error: {exc}"


def call(ctx: ToolContext, tool_name: str, **args: Any) -> tuple[str, bool]:
    """One real tool call through the tool boundary; unspecified arguments are sent as null."""
    tool = all_tools()[tool_name]
    full = {**{k: None for k in tool.parameters["properties"]}, **args}
    part = run_tool(all_tools(), ToolCallPart("c1", tool_name, json.dumps(full)), ctx)
    return part.output, part.is_error


def written_path(result: str) -> Path:
    m = re.search(r"File written: (.+?\.md)(?: Index line refreshed automatically\.|$)", result)
    assert m, result
    return Path(m.group(1))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


@pytest.fixture
def store(repo: Path) -> MemoryStore:
    return MemoryStore.for_project(repo)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    s, p = tmp_path / "sys", tmp_path / "proj"
    s.mkdir()
    p.mkdir()
    return s, p


def index(dir_: Path) -> str:
    return (dir_ / "index.md").read_text(encoding="utf-8")


# -- 1. the returned path is usable by the file tools ---------------------------------------------
class TestFileToolsOnMemoryPaths:
    def test_write_then_edit_and_read_the_returned_path(self, repo: Path, store: MemoryStore) -> None:
        ctx = ToolContext(root=repo, memories=store)
        out, err = call(ctx, "memory_write", name="release", content="# Release\n1. run tests\n", scope="project")
        assert not err, out
        path = written_path(out)
        assert path == store.project_dir / "release.md"
        out, err = call(ctx, "edit_file", path=str(path), old="run tests", new="run ./scripts/test.sh")
        assert not err, out
        assert path.read_text() == "# Release\n1. run ./scripts/test.sh\n"
        out, err = call(ctx, "read_file", path=str(path))
        assert not err and "run ./scripts/test.sh" in out, out
        # the memory reads back with the edit
        out, err = call(ctx, "memory_read", name="release")
        assert (out, err) == ("# Release\n1. run ./scripts/test.sh\n", False)
        # the system scope too
        out, err = call(ctx, "memory_write", name="me", content="likes tea", scope="system")
        path = written_path(out)
        assert path == store.system_dir / "me.md"
        out, err = call(ctx, "edit_file", path=str(path), old="tea", new="coffee")
        assert not err and out.startswith(f"Edited {path}: replaced 1 occurrence"), out
        assert path.read_text() == "likes coffee"
        # a model overlay's path works as well
        store.model = "gemma4o"
        out, err = call(ctx, "memory_write", name="me", content="be brief", scope="system", current_model_only=True)
        overlay = written_path(out)
        assert not err and overlay == store.system_dir / "me.gemma4o.md"
        out, err = call(ctx, "edit_file", path=str(overlay), old="brief", new="terse")
        assert not err and overlay.read_text() == "be terse", out

    def test_other_places_stay_refused(self, repo: Path, store: MemoryStore, tmp_path: Path) -> None:
        ctx = ToolContext(root=repo, memories=store)
        call(ctx, "memory_write", name="mine", content="x", scope="project")
        other = MemoryStore.for_project(tmp_path / "other-repo")
        other.write("project", "theirs", "secret")
        theirs = other.project_dir / "theirs.md"
        outside = tmp_path / "outside.txt"
        outside.write_text("secret")
        (store.project_dir / "link.md").symlink_to(outside)
        (store.project_dir / "dir_link").symlink_to(other.project_dir)
        refused = [
            str(theirs),  # another project's memory folder
            str(store.system_dir / "projects" / other.project_dir.name / "theirs.md"),
            f"{store.project_dir}/../{other.project_dir.name}/theirs.md",  # '..' out of this project's folder
            f"{store.project_dir}/../{store.project_dir.name}/mine.md",  # '..' at all, even back in
            str(store.system_dir / "projects"),
            str(outside),
            str(store.project_dir / "link.md"),  # a symlink out of the folder
            str(store.project_dir / "dir_link" / "theirs.md"),
            str(store.project_dir / ".provenance.json"),  # dot-files: locks, records, the trash
            str(store.system_dir / ".bundles" / ".trash"),
            str(store.system_dir.parent / "sessions"),  # the rest of SHIRO_HOME
        ]
        for path in refused:
            for name, args in [
                ("read_file", {"path": path}),
                ("edit_file", {"path": path, "old": "secret", "new": "public"}),
                ("write_file", {"path": path, "content": "x"}),
            ]:
                out, err = call(ctx, name, **args)
                assert err and out.startswith("Error: path") and "outside the project root" in out, (path, out)
                assert "(or right in this session's memory folders)" in out
        assert theirs.read_text() == "secret" and outside.read_text() == "secret"
        # without a memory store (--no-memory) the memory folders are refused too, and not mentioned
        off = ToolContext(root=repo, memories=None)
        out, err = call(off, "read_file", path=str(store.project_dir / "mine.md"))
        assert err and "outside the project root" in out and "memory folders" not in out

    def test_the_folders_themselves_are_not_walked(self, repo: Path, store: MemoryStore, tmp_path: Path) -> None:
        """A walk of the system folder would reach every project's memories (under projects/)."""
        ctx = ToolContext(root=repo, memories=store)
        call(ctx, "memory_write", name="mine", content="find me", scope="project")
        MemoryStore.for_project(tmp_path / "other-repo").write("project", "theirs", "find me")
        for folder in (store.system_dir, store.project_dir):
            out, err = call(ctx, "grep", pattern="find me", path=str(folder))
            assert err and "outside the project root" in out, out
            out, err = call(ctx, "list_files", pattern=f"{folder}/**/*.md")
            assert err and "outside the project root" in out, out
        out, err = call(ctx, "grep", pattern="find me", path=str(store.project_dir / "mine.md"))
        assert not err and "find me" in out, out


# -- 2. remove: true -------------------------------------------------------------------------------
TRASH_NAME = re.compile(r"memory-(.+)-\d{8}-\d{6}(-\d+)?")


class TestRemove:
    def test_moves_file_and_overlays_to_the_trash_and_drops_the_line(self, dirs) -> None:
        s, p = dirs
        store = MemoryStore(s, p, "gemma4o")
        store.write("project", "tips", "base", description="tips")
        store.write("project", "tips", "overlay", current_model_only=True)
        store.write("project", "tips.v2", "a dotted memory of its own")  # has its own index line
        store.write("project", "keep", "stays")
        (p / "index.md").write_text(index(p) + "\n## Mine\nhand-written\n")
        out = said(store.write, "project", "tips", "", remove=True)
        m = re.fullmatch(r"Memory 'tips' removed from project scope: moved to (.+); index line dropped\.", out)
        assert m, out
        trash = Path(m.group(1))
        assert trash.parent == s / ".bundles" / ".trash" and TRASH_NAME.fullmatch(trash.name)
        assert TRASH_NAME.fullmatch(trash.name).group(1) == "tips"  # type: ignore[union-attr]
        assert sorted(f.name for f in trash.iterdir()) == ["tips.gemma4o.md", "tips.md"]
        assert (trash / "tips.md").read_text() == "base"
        assert not (p / "tips.md").exists() and not (p / "tips.gemma4o.md").exists()
        assert (p / "tips.v2.md").exists() and (p / "keep.md").exists()
        text = index(p)
        assert "**tips**" not in text and "- **tips.v2** ·" in text and "- **keep** ·" in text
        assert text.endswith("\n## Mine\nhand-written\n") and "\n\n\n" not in text
        assert store.read("tips").missing == ["tips"]
        # a second remove of the same name in the same second gets its own folder
        store.write("project", "tips", "again")
        again = said(store.write, "project", "tips", None, remove=True)
        assert "removed from project scope" in again and Path(again.split("moved to ")[1].split(";")[0]) != trash

    def test_system_scope(self, dirs) -> None:
        s, p = dirs
        store = MemoryStore(s, p)
        store.write("system", "me", "x")
        out = said(store.write, "system", "me", None, remove=True)
        assert out.startswith(f"Memory 'me' removed from system scope: moved to {s / '.bundles' / '.trash'}/memory-me-")
        assert not (s / "me.md").exists() and "**me**" not in index(s)

    def test_refusals(self, dirs) -> None:
        s, p = dirs
        store = MemoryStore(s, p, "gemma4o")
        store.write("project", "a", "x")
        only = "Error: remove: true takes only name and scope (no content, description or current_model_only)"
        assert said(store.write, "project", "a", "x", remove=True) == only
        assert said(store.write, "project", "a", "", description="d", remove=True) == only
        assert said(store.write, "project", "a", "", current_model_only=True, remove=True) == only
        assert said(store.write, "project", "index", "", remove=True) == (
            "Error: the index can't be removed; it is kept up to date for you"
        )
        assert said(store.write, "project", "nope", "", remove=True) == "Error: no memory 'nope' in project scope"
        assert said(store.write, "system", "a", "", remove=True) == "Error: no memory 'a' in system scope"
        assert said(store.write, "", "a", "", remove=True) == "Error: scope is required"
        assert said(store.write, "global", "a", "", remove=True) == (
            "Error: invalid scope 'global', expected one of: project, system"
        )
        assert said(store.write, "project", "../a", "", remove=True) == (
            "Error: invalid memory name '../a': use a plain name (no /, \\ or ..)"
        )
        assert (p / "a.md").exists() and not (s / ".bundles").exists()

    def test_dangling_line_dropped_alone(self, dirs) -> None:
        s, p = dirs
        store = MemoryStore(s, p)
        store.write("project", "gone", "x", description="deleted by hand")
        (p / "gone.md").unlink()
        out = said(store.write, "project", "gone", "", remove=True)
        assert out == "Memory 'gone' had no file in project scope; its dangling index line was dropped."
        assert "**gone**" not in index(p) and not (s / ".bundles").exists()

    def test_bundle_owned_memories_are_refused(self, dirs) -> None:
        s, p = dirs
        store = MemoryStore(s, p)
        # owned by its index line (`· from <bundle>`)
        (s / "gh.md").write_text("gh helper")
        (s / "index.md").write_text("# Memory Index\n\n- **gh** · system · 2026-01-01 · 9 · from gh-kit — helper\n")
        assert said(store.write, "system", "gh", "", remove=True) == (
            "Error: memory 'gh' came from bundle gh-kit; `shiro bundle uninstall gh-kit` removes it"
        )
        # owned by an installed bundle's record (its line lost the owner)
        store.write("system", "ci", "ci notes")
        record = s / ".bundles" / "ci-kit" / "manifest.json"
        record.parent.mkdir(parents=True)
        record.write_text(json.dumps({"name": "ci-kit", "version": "1", "files": ["ci.md"]}))
        assert said(store.write, "system", "ci", "", remove=True) == (
            "Error: memory 'ci' came from bundle ci-kit; `shiro bundle uninstall ci-kit` removes it"
        )
        assert (s / "gh.md").exists() and (s / "ci.md").exists()
        assert "**gh**" in index(s) and "**ci**" in index(s)
        # the same name in the other scope is not the bundle's
        store.write("project", "ci", "mine")
        assert "removed from project scope" in said(store.write, "project", "ci", "", remove=True)

    def test_through_the_tool(self, dirs, tmp_path: Path) -> None:
        s, p = dirs
        store = MemoryStore(s, p)
        ctx = ToolContext(root=tmp_path, memories=store)
        call(ctx, "memory_write", name="old", content="x", scope="project")
        out, err = call(ctx, "memory_write", name="old", scope="project", remove=True)
        assert not err and out.startswith("Memory 'old' removed from project scope: moved to "), out
        out, err = call(ctx, "memory_write", name="index", scope="project", remove=True)
        assert (out, err) == ("Error: the index can't be removed; it is kept up to date for you", True)

    def test_schema_is_strict_compatible(self) -> None:
        params = memory_write.parameters
        assert params["required"] == list(params["properties"]) and params["additionalProperties"] is False
        assert params["properties"]["remove"]["type"] == ["boolean", "null"]
        assert params["properties"]["content"]["type"] == ["string", "null"]
        assert params["properties"]["name"]["type"] == "string"
        assert params["properties"]["scope"]["enum"] == ["project", "system"]
        assert "edit_file" in memory_write.description and "remove: true" in memory_write.description


# -- 3. the index-size note ------------------------------------------------------------------------
class TestIndexSizeNote:
    def test_crossing_note_is_the_seeds(self) -> None:
        assert INDEX_WARN_TOKENS == 2500
        assert crossing_note("project", 2500, 2510) == NOTE.format(scope="project", tokens=2510, limit=2500)
        assert crossing_note("project", 2501, 2600) is None  # already over: no note
        assert crossing_note("project", 2400, 2500) is None  # at the limit is not over
        assert crossing_note("system", 10, 20, limit=0) is None  # 0 turns it off
        assert index_tokens("abcde") == 2 and index_tokens("") == 0

    def test_a_write_that_crosses_2500_tokens_says_so_once(self, dirs) -> None:
        s, p = dirs
        store = MemoryStore(s, p, "gemma4o")
        filler = "# Memory Index\n\n" + "x" * (4 * 2500 - len("# Memory Index\n\n") - 1) + "\n"
        (p / "index.md").write_text(filler)
        assert index_tokens(filler) == 2500
        out = store.write("project", "one", "body", description="first")
        after = math.ceil(len(index(p)) / 4)
        assert out == (
            f"Memory 'one' saved to project scope (4 bytes). File written: {p / 'one.md'} "
            "Index line refreshed automatically.\n\n" + NOTE.format(scope="project", tokens=after, limit=2500)
        )
        # the index is over now: no note for the next writes
        assert "Note:" not in store.write("project", "two", "body")
        assert "Note:" not in store.write("project", "one", "", description="shorter")
        # nor for an overlay, the verbatim index write or a remove
        assert "Note:" not in store.write("project", "one", "overlay", current_model_only=True)
        assert "Note:" not in store.write("project", "two", "", remove=True)
        assert "Note:" not in store.write("project", "index", filler + "y" * 100)

    def test_description_only_write_can_cross(self, dirs) -> None:
        s, p = dirs
        store = MemoryStore(s, p, index_warn_tokens=60)
        store.write("system", "a", "body")
        assert index_tokens(index(s)) <= 60
        out = store.write("system", "a", None, description="d" * 120)
        assert out.startswith("Memory 'a' description updated in system scope")
        assert out.endswith(
            "Index line refreshed automatically.\n\n"
            + NOTE.format(scope="system", tokens=index_tokens(index(s)), limit=60)
        )

    def test_off_when_zero(self, dirs) -> None:
        s, p = dirs
        store = MemoryStore(s, p, index_warn_tokens=0)
        assert "Note:" not in store.write("project", "a", "body", description="d" * 200)


# -- 4. the fallback (alias) overlay key -----------------------------------------------------------
class TestFallbackOverlay:
    def test_alias_overlay_only_when_the_key_has_none(self, dirs) -> None:
        s, p = dirs
        (p / "tips.md").write_text("base")
        (p / "tips.fast.md").write_text("alias guidance")
        store = MemoryStore(s, p, "qwen3.6-35b-a3b", fallback_model="fast")
        assert store.model_key == "qwen3-6-35b-a3b" and store.fallback_key == "fast"
        assert store.read("tips").bodies == ["base" + SEP + "Model-specific guidance (fast):\nalias guidance"]
        (p / "tips.qwen3-6-35b-a3b.md").write_text("target guidance")
        assert store.read("tips").bodies == [
            "base" + SEP + "Model-specific guidance (qwen3-6-35b-a3b):\ntarget guidance"
        ]
        # without the alias, its overlay is dormant
        (p / "tips.qwen3-6-35b-a3b.md").unlink()
        assert MemoryStore(s, p, "qwen3.6-35b-a3b").read("tips").bodies == ["base"]

    def test_no_fallback_when_it_is_the_key_itself_or_blank(self, dirs) -> None:
        s, p = dirs
        assert MemoryStore(s, p, "gpt-5", fallback_model="GPT 5").fallback_key is None
        assert MemoryStore(s, p, "gpt-5", fallback_model="  ").fallback_key is None
        assert MemoryStore(s, p, None, fallback_model="fast").fallback_key == "fast"

    def test_overlays_are_written_under_the_models_key_not_the_alias(self, dirs) -> None:
        s, p = dirs
        store = MemoryStore(s, p, "qwen3.6-35b-a3b", fallback_model="fast")
        store.write("project", "tips", "base")
        out = store.write("project", "tips", "guidance", current_model_only=True)
        assert out.startswith("Model overlay 'tips' for qwen3-6-35b-a3b saved to project scope")
        assert (p / "tips.qwen3-6-35b-a3b.md").exists() and not (p / "tips.fast.md").exists()

    def test_for_project_passes_the_alias(self, repo: Path) -> None:
        store = MemoryStore.for_project(repo, "qwen3.6-35b-a3b", fallback_model="fast")
        assert store.fallback_key == "fast"
