"""The memory tools: ``remember``, ``recall``, ``forget`` (project notes, seed shiro-neko) and
``memory_read``, ``memory_write`` (named memories, seed samagotchi).

The stores come from the tool context: ``ctx.notes`` (a :class:`~shiro_kernel.memory.notes.NoteStore`, or
None under ``--no-memory``), ``ctx.memories`` (a :class:`~shiro_kernel.memory.named.MemoryStore`, or None)
and ``ctx.provenance`` (an optional dict recorded with each remembered note). None of these tools touch
the user's files, but ``remember``, ``forget`` and ``memory_write`` change what every later session is
told (a prompt injection in a data file could otherwise plant a lasting instruction), so they ask for
approval like ``write_file`` (``Effect.OUTSIDE``: a change beyond the project that undo cannot take back;
refused under "read-only"); ``recall`` and
``memory_read`` only read. ``memory_write`` names the file it wrote; the file tools
accept that path (:meth:`~shiro_kernel.tools.base.ToolContext.resolve` allows the session's two memory
scope folders), so a small change is an ``edit_file`` away.
"""

from __future__ import annotations

from typing import Any

from ..errors import MemoryRefused
from ..memory.named import SEPARATOR, Found, MemoryStore
from ..memory.notes import DISABLED, KINDS, NoteStore
from .base import Effect, Preview, Tool, ToolContext, ToolError, outside, schema


def _notes(ctx: ToolContext) -> NoteStore:
    store = ctx.notes
    if store is None:
        raise ToolError(DISABLED)
    return store


def _memories(ctx: ToolContext) -> MemoryStore:
    store = ctx.memories
    if store is None:
        raise ToolError(DISABLED)
    return store


def _remember(args: dict[str, Any], ctx: ToolContext) -> str:
    text = args.get("text") or ""
    provenance = ctx.provenance
    added = _notes(ctx).add(args.get("kind") or "", text, source=dict(provenance) if provenance else None)
    if added.entry is None:
        return f"Already recorded: {text.strip()}"
    line = f"Remembered as {added.entry['kind']} ({added.stored} stored): {added.entry['text']}"
    if added.set_aside is not None:
        line += f" (the notes file was unreadable; it was kept aside as {added.set_aside})"
    return line


def _recall(args: dict[str, Any], ctx: ToolContext) -> str:
    query = args.get("query") or ""
    found = _notes(ctx).recall(query)
    if not found:
        return f'Nothing recorded about "{query}".'
    return "\n".join(f"({e['kind']}) {e['text']}" for e in found)


def _forget(args: dict[str, Any], ctx: ToolContext) -> str:
    text = args.get("text") or ""
    removed = _notes(ctx).forget(text)
    if removed == 0:
        return f'No memory matches "{text}".'
    return f"Forgot {removed} memor{'y' if removed == 1 else 'ies'}."


def read_result(found: Found) -> str:
    """The seed's ``memory_read`` text for named entries: the bodies joined by the separator, then one
    ``Error: memory not found: …`` line and one ``Error: memory '…' is muted …`` line per muted name.
    Nothing found at all is refused (an error result)."""
    muted = [f"Error: memory '{n}' is muted for this session" for n in found.muted]
    if not found.bodies and not found.missing:
        text = "\n".join(muted)
    else:
        missing = [f"Error: memory not found: {', '.join(found.missing)}"] if found.missing else []
        text = SEPARATOR.join([*found.bodies, *missing, *muted])
    if not found.bodies:  # an error result: the tool boundary puts the first "Error: " back
        raise MemoryRefused(text.removeprefix("Error: "))
    return text


def read_text(store: MemoryStore, name: str | None, scope: str | None = None) -> str:
    """``memory_read``'s result: the indexes for a blank name, else the named entries."""
    name = (name or "").strip()
    if not name:
        return store.indexes(scope)
    return read_result(store.read(name, scope))


def _memory_read(args: dict[str, Any], ctx: ToolContext) -> str:
    return read_text(_memories(ctx), args.get("name"), args.get("scope"))


def _memory_write(args: dict[str, Any], ctx: ToolContext) -> str:
    return _memories(ctx).write(
        args.get("scope"),
        args.get("name"),
        args.get("content"),
        description=args.get("description"),
        current_model_only=bool(args.get("current_model_only")),
        remove=bool(args.get("remove")),
    )


def _remember_preview(args: dict[str, Any], ctx: ToolContext) -> Preview | None:
    """The note every later session would be told."""
    if not isinstance(args.get("text"), str):
        return None
    kind = args.get("kind") if isinstance(args.get("kind"), str) else "note"
    return Preview(f"remember this {kind} for every later session of this project", args["text"], "text")


def _forget_preview(args: dict[str, Any], ctx: ToolContext) -> Preview | None:
    if not isinstance(args.get("text"), str):
        return None
    return Preview("forget every project note containing", args["text"], "text")


def _memory_write_preview(args: dict[str, Any], ctx: ToolContext) -> Preview | None:
    """What later sessions would read: the memory's content (a diff when it exists already), its index line, or
    its removal."""
    if not isinstance(args.get("name"), str):
        return None
    from ..memory.index_file import name_problem, project_dir, system_dir

    memory, scope = args["name"], args.get("scope")
    where = "the system scope (every project)" if scope == "system" else f"the {scope or '?'} scope"
    if args.get("remove"):
        return Preview(f"remove the memory {memory} from {where} (moved to the trash)", None)
    content = args.get("content") if isinstance(args.get("content"), str) else ""
    if not content:
        description = args.get("description")
        text = description if isinstance(description, str) else None
        return Preview(f"change the index line of the memory {memory} in {where}", text, "text")
    old = None
    if scope in ("project", "system") and name_problem(memory) is None:
        folder = system_dir() if scope == "system" else project_dir(ctx.root)
        try:
            old = (folder / f"{memory}.md").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            old = None
    overlay = " (for this model only)" if args.get("current_model_only") else ""
    if old is None or overlay:
        return Preview(f"save the memory {memory} in {where}{overlay}", content, "markdown")
    return Preview(f"overwrite the memory {memory} in {where}", content, path=f"{memory}.md", old=old)


#: why a change to the project's notes is outside undo
NOTES_OUTSIDE = "the project's notes are not part of undo"

remember = Tool(
    name="remember",
    description=(
        "Record something about this project that will still be true next session: a decision and its reason, "
        "a command that works, a constraint, a trap you hit. Persisted across sessions and shown to you at start. "
        "Do not use it for narration or for anything specific to the current task only."
    ),
    parameters=schema(
        {
            "kind": {
                "type": "string",
                "enum": list(KINDS),
                "description": "fact: how it is. decision: what was chosen and why. gotcha: a trap. "
                "command: an invocation that works",
            },
            "text": {"type": "string", "description": "One self-contained line, understandable with no other context"},
        }
    ),
    run=_remember,
    effects=Effect.OUTSIDE,
    touches=outside(NOTES_OUTSIDE),
    preview=_remember_preview,
    values=False,
)

recall = Tool(
    name="recall",
    description=(
        "Search what you recorded about this project in earlier sessions. Use it before investigating anything "
        "that might already be known, and when the user refers to past work."
    ),
    parameters=schema({"query": {"type": "string", "description": "Words that would appear in the note"}}),
    run=_recall,
    effects=Effect.READS,
    served=9,
    values=False,
)

forget = Tool(
    name="forget",
    description="Remove a memory that turned out to be wrong or is now obsolete. Search with recall first to get its text.",
    parameters=schema(
        {"text": {"type": "string", "description": "Exact text of the memory to remove, or a distinctive part of it"}}
    ),
    run=_forget,
    effects=Effect.OUTSIDE,
    touches=outside(NOTES_OUTSIDE),
    preview=_forget_preview,
    values=False,
)

memory_read = Tool(
    name="memory_read",
    description=(
        "Read a memory entry from scoped memories. Scope is optional: if omitted, read falls back from project to "
        "system. Leave name blank to read indexes."
    ),
    parameters=schema(
        {
            "name": {
                "type": "string",
                "description": "Memory entry name without .md extension; leave blank for indexes",
            },
            "scope": {"type": "string", "description": "Optional scope: project or system"},
        },
        optional=("name", "scope"),
    ),
    run=_memory_read,
    effects=Effect.READS,
    served=10,
    values=False,
)

memory_write = Tool(
    name="memory_write",
    description=(
        "Write or update a memory entry in a scoped memories directory (project or system). The index line is "
        "maintained automatically; the result gives the full file path for later targeted edits: for a small "
        "change to an existing memory (a step, a line), use edit_file on that path rather than rewriting it all. "
        "With name, scope and description only, just the index line changes. With name, scope and remove: true, "
        "the memory (and its model overlays) moves to the trash and its index line is dropped."
    ),
    parameters=schema(
        {
            "name": {"type": "string", "description": "Memory entry name without .md extension"},
            "content": {
                "type": "string",
                "description": "Markdown content to write (empty for a description-only update or a remove)",
            },
            "scope": {
                "type": "string",
                "enum": ["project", "system"],
                "description": "Scope to write into: project or system",
            },
            "description": {
                "type": "string",
                "description": "Optional short description appended to the managed index line",
            },
            "current_model_only": {
                "type": "boolean",
                "description": "Write a model-specific overlay for the current model only "
                "(the base entry must already exist in that scope)",
            },
            "remove": {
                "type": "boolean",
                "description": "Remove the memory: its file and model overlays move to the trash and its index "
                "line is dropped (pass only name and scope; bundle memories and the index cannot be removed)",
            },
        },
        optional=("content", "description", "current_model_only", "remove"),
    ),
    run=_memory_write,
    effects=Effect.OUTSIDE,
    touches=outside("the named memories are not part of undo"),
    preview=_memory_write_preview,
    own_checks=frozenset({"name", "scope"}),  # the model reads the store's words (servers that skip the schema)
    values=False,
)

TOOLS = [remember, recall, forget, memory_read, memory_write]
