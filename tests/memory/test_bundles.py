"""Bundles: manifest validation, needs, install/status/upgrade/uninstall, --dry-run, --force, markers."""

from __future__ import annotations

import hashlib
import os
from datetime import date
from pathlib import Path

import pytest

from shiro_kernel.errors import BundleError
from shiro_kernel.memory import bundles, manifest
from shiro_kernel.memory import named as memories
from shiro_kernel.memory.bundles import annotate_index
from shiro_kernel.memory.manifest import Need, found, parse_needs
from shiro_kernel.memory.named import MemoryStore

MISSING = "shiro-no-such-cmd-xyz"
TODAY = date.today().isoformat()


def make_bundle(
    tmp_path: Path, name: str = "gh-kit", version: str = "1.0", files: dict[str, str] | None = None, extra: str = ""
) -> Path:
    folder = tmp_path / f"src-{name}-{version}"
    folder.mkdir()
    files = files if files is not None else {"gh_helper.md": "# gh helper\nuse gh\n", "ci.md": "ci notes\n"}
    lines = [f"name: {name}", f"version: '{version}'", "files:"]
    for fname, body in files.items():
        (folder / fname).write_text(body)
        lines.append(f"  {fname}: {hashlib.sha256(body.encode()).hexdigest()}")
    lines += [
        "needs:",
        "  - command: sh",
        "    why: runs scripts",
        f"  - command: {MISSING}",
        "    why: reads PRs",
        "    hint: brew install it",
        "  - sh",
    ]
    (folder / "manifest.yml").write_text("\n".join(lines) + "\n" + extra)
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    p.mkdir()
    return p


def sysdir() -> Path:
    return memories.system_dir()


# -- needs ----------------------------------------------------------------------------------------
def test_parse_needs_forms_and_errors() -> None:
    assert parse_needs(None) == []
    assert parse_needs(
        ["jq", {"command": "gh", "why": " reads PRs ", "hint": "  "}, {"command": "jq", "why": "x"}]
    ) == [Need("jq"), Need("gh", "reads PRs", None)]
    with pytest.raises(BundleError, match="^needs: must be a list of commands$"):
        parse_needs("gh")
    with pytest.raises(BundleError, match="^needs: each item must be a command name or a mapping with command:, not "):
        parse_needs([{"why": "x"}])
    with pytest.raises(
        BundleError, match="^needs: each item must be a command name or a mapping with command:, not 42$"
    ):
        parse_needs([42])
    for bad in ("/usr/bin/gh", "g h", "-gh", "../gh"):
        with pytest.raises(BundleError, match=r'^needs: ".*" is not a plain command name$'):
            parse_needs([bad])


def test_found_is_a_path_lookup(tmp_path: Path) -> None:
    assert found("sh")
    assert not found(MISSING)
    assert not found("sh", path="") and not found("sh", path=os.pathsep)
    exe = tmp_path / "bin" / "tool"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    assert not found("tool", path=str(exe.parent))  # not executable
    exe.chmod(0o755)
    assert found("tool", path=f"{os.pathsep}{exe.parent}")
    (tmp_path / "bin" / "dir").mkdir()
    assert not found("dir", path=str(exe.parent))
    assert manifest.marker([Need("gh"), Need("jq")]) == "[needs gh, jq: not found on PATH]"
    assert manifest.marker([]) is None


# -- manifest -------------------------------------------------------------------------------------
def test_manifest_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BundleError, match="^manifest.yml not found in "):
        bundles.install(empty)
    (empty / "manifest.yml").write_text("version: '1'\n")
    with pytest.raises(BundleError, match="^manifest missing required field: name$"):
        bundles.install(empty)
    (empty / "manifest.yml").write_text("name: x\n")
    with pytest.raises(BundleError, match="^manifest missing required field: version$"):
        bundles.install(empty)
    (empty / "manifest.yml").write_text("name: x\nversion: '1'\nneeds: gh\n")
    with pytest.raises(BundleError, match="^needs: must be a list of commands$"):
        bundles.install(empty)
    (empty / "manifest.yml").write_text("name: ../x\nversion: '1'\n")
    with pytest.raises(BundleError, match="is not a plain name"):
        bundles.install(empty)
    (empty / "manifest.yml").write_text("name: x\nversion: '1'\nfiles:\n  ../evil.md: abc\n")
    with pytest.raises(BundleError, match="is not a plain .md memory file name"):
        bundles.install(empty)
    (empty / "a.md").write_text("a")
    (empty / "manifest.yml").write_text("name: x\nversion: '1'\nfiles:\n  a.md: sha256:00\n")
    with pytest.raises(BundleError, match="does not match its checksum"):
        bundles.install(empty)
    assert not (sysdir() / "a.md").exists()


def test_manifest_scope_and_ignored_fields(tmp_path: Path, project: Path) -> None:
    folder = make_bundle(tmp_path, extra="scope: PROJECT\nhooks:\n  h.rb: {sha256: x}\n")
    m = manifest.load_manifest(folder)
    assert m.scope == "project" and m.ignored == ["hooks"]
    lines = bundles.install(folder, project=project)
    assert lines[0] == "Installed gh-kit 1.0 into project scope: gh_helper.md, ci.md"
    assert lines[-1] == "Note: manifest fields shiro does not use were ignored: hooks"
    assert (memories.project_dir(project) / "ci.md").exists()


# -- install / status / upgrade / uninstall -------------------------------------------------------
def test_install_lines_files_index_and_record(tmp_path: Path) -> None:
    folder = make_bundle(tmp_path)
    lines = bundles.install(folder)
    assert lines == [
        "Installed gh-kit 1.0 into system scope: gh_helper.md, ci.md",
        f"needs {MISSING}: not found on PATH (brew install it); installed anyway",
    ]
    assert (sysdir() / "gh_helper.md").read_text() == "# gh helper\nuse gh\n"
    text = (sysdir() / "index.md").read_text()
    assert f"- **gh_helper** · system · {TODAY} · 19 · from gh-kit\n" in text
    assert f"- **ci** · system · {TODAY} · 9 · from gh-kit\n" in text
    rec = sysdir() / ".bundles" / "gh-kit"
    assert (rec / "manifest.json").is_file() and (rec / "bases" / "ci.md").read_text() == "ci notes\n"
    # a later memory_write keeps the ownership and takes the description
    store = MemoryStore(sysdir(), tmp_path / "p")
    store.write("system", "ci", "ci notes v2\n", description="CI")
    assert f"- **ci** · system · {TODAY} · 12 · from gh-kit — CI\n" in (sysdir() / "index.md").read_text()


def test_status_lists_every_need(tmp_path: Path) -> None:
    bundles.install(make_bundle(tmp_path))
    lines = bundles.status("gh-kit")
    assert lines[0] == f"gh-kit 1.0 (system scope), installed {TODAY}"
    assert lines[1] == "files: ci.md, gh_helper.md"
    assert lines[2:] == ["needs sh (runs scripts) [ok]", f"needs {MISSING} [not found]: brew install it"]
    with pytest.raises(BundleError, match="^bundle 'nope' is not installed$"):
        bundles.status("nope")
    with pytest.raises(BundleError, match="invalid bundle name"):
        bundles.status("../gh-kit")


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    folder = make_bundle(tmp_path)
    lines = bundles.install(folder, dry_run=True)
    assert lines == [
        "Would install gh-kit 1.0 into system scope: gh_helper.md, ci.md",
        f"needs {MISSING}: not found on PATH (brew install it); installed anyway",
    ]
    assert not sysdir().exists()  # not even the scope folder
    bundles.install(folder)
    before = {p: p.read_bytes() for p in sysdir().rglob("*") if p.is_file()}
    assert bundles.uninstall("gh-kit", dry_run=True)[1].startswith("Would move to the trash: ci.md, gh_helper.md (")
    assert bundles.upgrade(make_bundle(tmp_path, version="2.0"), dry_run=True)[0].startswith(
        "Would upgrade gh-kit 1.0 → 2.0 in system scope"
    )
    assert {p: p.read_bytes() for p in sysdir().rglob("*") if p.is_file()} == before


def test_same_name_user_file_skipped_unless_force(tmp_path: Path) -> None:
    store = MemoryStore(sysdir(), tmp_path / "p")
    store.write("system", "ci", "mine\n", description="my CI notes")
    folder = make_bundle(tmp_path)
    lines = bundles.install(folder)
    assert lines[0] == "Installed gh-kit 1.0 into system scope: gh_helper.md"
    assert lines[1].startswith("Skipped ci.md: a memory of that name already exists in system scope")
    assert (sysdir() / "ci.md").read_text() == "mine\n"
    assert f"- **ci** · system · {TODAY} · 5 — my CI notes\n" in (sysdir() / "index.md").read_text()
    assert "skipped (kept the user's file): ci.md" in bundles.status("gh-kit")
    # uninstall leaves the user's file alone
    bundles.uninstall("gh-kit")
    assert (sysdir() / "ci.md").read_text() == "mine\n"
    lines = bundles.install(folder, force=True)
    assert lines[0] == "Installed gh-kit 1.0 into system scope: gh_helper.md, ci.md"
    assert (sysdir() / "ci.md").read_text() == "ci notes\n"
    assert f"- **ci** · system · {TODAY} · 9 · from gh-kit — my CI notes\n" in (sysdir() / "index.md").read_text()


def test_upgrade(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="is not installed in system scope; use install"):
        bundles.upgrade(make_bundle(tmp_path, version="0.9"))
    bundles.install(make_bundle(tmp_path))
    (sysdir() / "gh_helper.md").write_text("edited by the user\n")
    v2 = make_bundle(tmp_path, version="2.0", files={"gh_helper.md": "v2 helper\n", "new.md": "new\n"})
    lines = bundles.upgrade(v2)
    assert lines[0] == "Upgraded gh-kit 1.0 → 2.0 in system scope: new.md"
    assert lines[1].startswith("Skipped gh_helper.md: changed since it was installed")
    assert lines[2].startswith("Moved to the trash: ci.md (") and ".bundles/.trash/gh-kit-" in lines[2]
    assert (sysdir() / "gh_helper.md").read_text() == "edited by the user\n"
    assert not (sysdir() / "ci.md").exists() and "**ci**" not in (sysdir() / "index.md").read_text()
    assert bundles.status("gh-kit")[0].startswith("gh-kit 2.0 (system scope)")
    lines = bundles.upgrade(v2, force=True)
    assert lines[0] == "Upgraded gh-kit 2.0 → 2.0 in system scope: gh_helper.md, new.md"
    assert (sysdir() / "gh_helper.md").read_text() == "v2 helper\n"


def test_uninstall_moves_to_trash(tmp_path: Path) -> None:
    bundles.install(make_bundle(tmp_path))
    (sysdir() / "index.md").write_text((sysdir() / "index.md").read_text() + "\n## Mine\nkeep me\n")
    lines = bundles.uninstall("gh-kit")
    assert lines[0] == "Uninstalled gh-kit 1.0 from system scope"
    assert lines[1].startswith("Moved to the trash: ci.md, gh_helper.md (")
    trash = Path(lines[1].split(" (", 1)[1].rstrip(")"))
    assert trash.parent == sysdir() / ".bundles" / ".trash" and trash.name.startswith("gh-kit-")
    assert (trash / "ci.md").read_text() == "ci notes\n" and (trash / ".record" / "manifest.json").exists()
    text = (sysdir() / "index.md").read_text()
    assert "from gh-kit" not in text and "## Mine\nkeep me\n" in text and "\n\n\n" not in text
    with pytest.raises(BundleError, match="is not installed"):
        bundles.uninstall("gh-kit")


def test_install_by_name_from_shiro_home(tmp_path: Path) -> None:
    home_bundle = sysdir().parent / "bundles" / "gh-kit"
    home_bundle.parent.mkdir(parents=True)
    make_bundle(tmp_path).rename(home_bundle)
    assert bundles.install("gh-kit")[0].startswith("Installed gh-kit 1.0")


# -- the prompt's marker --------------------------------------------------------------------------
def test_annotate_index_and_prompt_block(tmp_path: Path) -> None:
    bundles.install(make_bundle(tmp_path))
    store = MemoryStore(sysdir(), tmp_path / "p")
    store.write("system", "own", "mine\n", description="not from a bundle")
    raw = (sysdir() / "index.md").read_text()
    out = annotate_index(raw, sysdir())
    mark = f" [needs {MISSING}: not found on PATH]"
    for line in out.splitlines():
        if "from gh-kit" in line:
            assert line.endswith(mark)
        else:
            assert mark not in line
    assert out.replace(mark, "") == raw
    assert mark in store.prompt_block()
    assert mark not in store.indexes() and mark not in store.indexes("system")  # a blank read has no marker
    # all needs found: no marker; unreadable records: text unchanged
    assert annotate_index(raw, sysdir(), env_path=os.environ["PATH"] + os.pathsep + str(tmp_path / "none")) != raw
    fake = tmp_path / "fakebin"
    fake.mkdir()
    for cmd in ("sh", MISSING):
        (fake / cmd).write_text("")
        (fake / cmd).chmod(0o755)
    assert annotate_index(raw, sysdir(), env_path=str(fake)) == raw
    (sysdir() / ".bundles" / "gh-kit" / "manifest.json").write_text("{broken")
    assert annotate_index(raw, sysdir()) == raw
