"""An independent check of the providers' pairing rule (importable as ``historycheck``), written from the
APIs' 400 texts and not from :mod:`shiro_kernel.context.rules`, so tests of the rules and of the turn loop do
not grade the code with itself: every tool result answers a call made before it, and every call is answered
before the next user or assistant message."""

from __future__ import annotations

from shiro_kernel.transcript import Message, ToolCallPart, ToolResultPart


def pairing_problems(messages: list[Message], *, allow_open_end: bool = False) -> list[str]:
    """What the real API would refuse in ``messages``, one sentence each ([] when it would accept them).
    ``allow_open_end``: calls at the very end may lack results (a call waiting for approval)."""
    problems: list[str] = []
    open_calls: dict[str, str] = {}
    for index, message in enumerate(messages):
        if message.role in ("user", "assistant") and open_calls:
            problems.append(f"message {index}: calls {sorted(open_calls)} have no result before it")
            open_calls.clear()
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                open_calls[part.call_id] = part.name
            elif isinstance(part, ToolResultPart):
                if part.call_id not in open_calls:
                    problems.append(f"message {index}: a result for {part.call_id}, which no call made")
                else:
                    del open_calls[part.call_id]
    if open_calls and not allow_open_end:
        problems.append(f"the history ends with calls {sorted(open_calls)} that have no result")
    return problems
