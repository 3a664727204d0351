"""Where a request carries the per-step state (the task list, cells changed outside the agent …).

The state changes from step to step, so it goes after the conversation, where a provider's prefix cache
loses nothing by it: as one ``system`` message at the end. OpenAI's APIs take that; many local models'
chat templates do not. Qwen's (served by vLLM, llama.cpp, Ollama, MLX) raises "System message must be at
the beginning." for any system message but the first (llama.cpp answers 500 for it, vLLM 400), and
templates that make roles alternate (Mistral's, Gemma's) raise "… conversation roles must alternate …"
for that and for two user messages in a row.

So a request the server's template refused is sent again with the state placed elsewhere, and the place
is kept in that server and model's profile (:mod:`~shiro_kernel.provider.profile`):

1. ``system``: a system message after the conversation (the default);
2. ``user``: a user message after the conversation, marked as shiro's note, not the user's words (for a
   template that takes one system message, at the start);
3. ``alternate``: that note, and any user messages in a row merged into one (for a template that makes
   roles alternate: the note after the user's prompt, a pruned history's digest after the first prompt);
4. ``instructions``: at the end of the instructions (a last resort: a prefix cache then keeps only what
   comes before them).

Each keeps the conversation before the state as it was, so a prefix cache serves it as before (a merge
changes only the request's last message), except the last.
"""

from __future__ import annotations

import re
from typing import Any

#: the places, in the order they are tried
PLACES = ("system", "user", "alternate", "instructions")

#: a template that takes system messages only at the start (Qwen's text, and its paraphrases)
_SYSTEM_FIRST = re.compile(
    r"(?i)system message[s]? (must|should|can only|may only) (be )?(at|in) the (beginning|start|first)"
    r"|system (message|role|prompt)[^.\n]{0,40}(only|must be) (at|in|as) (the )?(first|beginning|start)"
)
#: a template that makes roles alternate (Mistral's, Gemma's: "conversation roles must alternate user/assistant")
_ALTERNATE = re.compile(r"(?i)roles must alternate|must alternate (between )?user")

#: what a state note sent as a user message says it is
USER_HEADER = "[A note from shiro, not from the user: the state of this session]"


def next_place(message: str, place: str, *, state: bool = True) -> str | None:
    """The place to try after the server refused, with ``message``, a request placed at ``place`` (``state``:
    it carried a state). None when the refusal is not about the placing, or no place is left. Never back: a
    template that refused a system message and then a user note goes on."""
    if _ALTERNATE.search(message):  # about the conversation too: users in a row are merged from now on
        tried = ("alternate", "instructions")
    elif state and _SYSTEM_FIRST.search(message):
        tried = ("user", "instructions")
    else:
        return None
    after = PLACES[PLACES.index(place) + 1 :]
    return next((p for p in tried if p in after), None)


def notice(model: str, place: str) -> str:
    """The one line the cell shows when the place changes."""
    where = {
        "user": "as a user message marked as its note",
        "alternate": "as a user message marked as its note, and user messages in a row as one",
        "instructions": "at the end of the instructions (a prefix cache then serves less of each request)",
    }[place]
    return (
        f"The chat template of {model} on this server takes no system message after the conversation"
        f"{' and makes roles alternate' if place != 'user' else ''}: shiro now sends its state note (the task "
        f"list, cells changed …) {where}."
    )


def responses_parts(items: list[Any], system: str, state: str, place: str) -> tuple[list[Any], str]:
    """A Responses request's ``input`` and ``instructions`` with ``state`` placed (``items`` unchanged)."""
    if state and place == "instructions":
        return items, f"{system}\n\n{state}" if system else state
    placed = [*items, _message(state, place)] if state else items
    return (_merged(placed, "input_text") if place == "alternate" else placed), system


def chat_messages(entries: list[Any], state: str, place: str) -> list[Any]:
    """Chat ``messages`` with ``state`` placed (``entries`` start with the system message, if any; the cached
    entries are never changed)."""
    if state and place == "instructions":
        if entries and isinstance(entries[0], dict) and entries[0].get("role") == "system":
            return [{"role": "system", "content": f"{entries[0]['content']}\n\n{state}"}, *entries[1:]]
        return [{"role": "system", "content": state}, *entries]
    placed = [*entries, _message(state, place)] if state else entries
    return _merged(placed, "text") if place == "alternate" else placed


def _message(state: str, place: str) -> dict[str, str]:
    if place == "system":
        return {"role": "system", "content": state}
    return {"role": "user", "content": f"{USER_HEADER}\n{state}"}


def _merged(messages: list[Any], text_type: str) -> list[Any]:
    """``messages`` with each run of user messages as one (their contents joined, texts by an empty line;
    ``text_type``: a text part's type on this API). The messages themselves are copied, never changed."""
    out: list[Any] = []
    for m in messages:
        if _is_user(m) and out and _is_user(out[-1]):
            out[-1] = {**out[-1], "content": _joined(out[-1].get("content"), m.get("content"), text_type)}
        else:
            out.append(m)
    return out


def _is_user(m: Any) -> bool:
    return isinstance(m, dict) and m.get("role") == "user" and m.get("type", "message") == "message"


def _joined(a: Any, b: Any, text_type: str) -> Any:
    if isinstance(a, str) and isinstance(b, str):
        return f"{a}\n\n{b}"

    def parts(c: Any) -> list[Any]:
        return list(c) if isinstance(c, list) else [{"type": text_type, "text": str(c or "")}]

    return [*parts(a), *parts(b)]


__all__ = ["PLACES", "USER_HEADER", "chat_messages", "next_place", "notice", "responses_parts"]
