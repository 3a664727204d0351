"""An in-memory model for fast unit tests of the turn loop (importable as ``fakemodel``).

:class:`FakeModel` is a :class:`~shiro_kernel.turn.ProviderLike`: it answers each ``stream`` call with the
next enqueued :class:`~fakeopenai.Reply` (or a callable taking the request, or an
:class:`~shiro_kernel.events.Error`), streaming its text in small deltas, and records every request in
:attr:`FakeModel.history`. No HTTP, no SDK: what it checks is the turn loop itself. The HTTP fake
(:mod:`fakeopenai`) stays for everything that must go through the real ``openai`` client.

It refuses what the real APIs refuse, so a turn-loop bug cannot hide behind a forgiving fake: a request
whose history has a tool call without a result, or a result without its call, raises
:class:`HistoryRuleBroken` (the real API answers 400; checked by :mod:`historycheck`, not the project's rules).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fakeopenai import Reply
from historycheck import pairing_problems

from shiro_kernel.events import Done, Error, ProviderEvent, TextDelta, Usage
from shiro_kernel.transcript import Message, Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

Answer = Reply | Error | Callable[["Request"], "Reply | Error"]


class HistoryRuleBroken(AssertionError):
    """The turn sent a history the real API would refuse with a 400."""


@dataclass
class Request:
    """One model call as the turn made it: copies, so later changes to the session do not show here."""

    system: str
    messages: list[Message]
    tools: list[str]
    state: str = ""

    def last_results(self) -> list[ToolResultPart]:
        """The tool results of the newest tool message (what the model is being told now)."""
        for message in reversed(self.messages):
            if message.role == "tool":
                return [p for p in message.parts if isinstance(p, ToolResultPart)]
        return []


@dataclass
class FakeModel:
    usage: tuple[int, int] = (100, 10)
    history: list[Request] = field(default_factory=list)
    _queue: list[Answer] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def enqueue(self, *answers: Answer) -> FakeModel:
        self._queue.extend(answers)
        return self

    #: the server keeps answers (the turn may refer to them); the fake has no window: the threshold is as given
    store: bool = True

    def threshold(self, threshold: int) -> int:
        return threshold

    def stream(
        self,
        system: str,
        messages: list[Message],
        tools: list[dict[str, Any]],
        abort: threading.Event | None = None,
        state: str = "",
        resend: Any = None,  # the fake never fails a call: nothing to repair
    ) -> Iterator[ProviderEvent]:
        messages = [Message.from_json(m.to_json()) for m in messages]
        request = Request(system, messages, [t["name"] for t in tools], state)
        _check_pairing(request.messages)
        with self._lock:
            self.history.append(request)
            if not self._queue:
                raise AssertionError(f"FakeModel: no reply enqueued for request {len(self.history)}")
            answer = self._queue.pop(0)
        if callable(answer) and not isinstance(answer, (Reply, Error)):
            answer = answer(request)
        if isinstance(answer, Error):
            yield answer
            return
        parts: list[Part] = []
        if answer.reasoning:
            parts.append(ReasoningPart([answer.reasoning]))
        if answer.text:
            for i in range(0, len(answer.text), 8):
                if abort is not None and abort.is_set():
                    return  # a stopped stream ends without Done, as the provider's does
                yield TextDelta(answer.text[i : i + 8])
            parts.append(TextPart(answer.text))
        for call in answer.tool_calls:
            args = call.arguments if isinstance(call.arguments, str) else _json(call.arguments)
            parts.append(ToolCallPart(call.call_id or f"call_{next(self._ids)}", call.name, args))
        tokens_in, tokens_out = answer.usage or self.usage
        yield Done(Message("assistant", parts), Usage(tokens_in, tokens_out, None))


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def _check_pairing(messages: list[Message]) -> None:
    problems = pairing_problems(messages)
    if problems:
        raise HistoryRuleBroken("; ".join(problems))
