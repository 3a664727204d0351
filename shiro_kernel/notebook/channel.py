"""The kernel's end of the notebook channel: a comm with the labextension (docs/notebook-protocol.md).

The kernel opens the comm (target ``shiro.notebook``); the panel showing this notebook answers ``hello``.
From then on :meth:`Channel.request` sends a request and waits for its reply. Replies arrive through the
comm's handler, which ipykernel runs on the kernel's main thread between cells — so a request made *on* that
thread (a blocking ``--wait`` turn) could never be answered: :meth:`Channel.request` refuses it in one
sentence instead of waiting (and a hello queued behind that cell cannot have arrived either, so before any
hello a blocked request says that no front end has answered and none can, not that there is none).

Several front ends can hear one comm (the same notebook in a second browser or a tab kept open; with
real-time collaboration every collaborator's window): each says hello, and each request names the one that
serves it (``to``): the front end that ran the turn's ``%shiro`` cell when it said hello, else the first that
did. Only that one serves it, and only its replies count.

The transport is a seam: :class:`IpykernelTransport` in a kernel, anything with the same two methods in
tests (a Python stand-in for the front end).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..errors import ToolError

TARGET = "shiro.notebook"
PROTOCOL = 1

NO_FRONT_END = (
    "no front end that can edit the notebook is attached (nbclient, papermill, terminal IPython, or a front "
    "end without the shiro extension such as VS Code); show the code in your answer instead"
)
BLOCKED = (
    "the notebook cannot be changed while this %shiro cell blocks the kernel (--wait, or Shiro.frontend "
    '"text"): JupyterLab hands edits to the kernel only between cells; show the code in your answer, or '
    "the user can ask again without --wait"
)

#: blocked before any front end answered: a front end's hello, queued behind this cell, cannot be told from none
UNANSWERED_BLOCKED = (
    "no front end that can edit the notebook has answered, and none can while this %shiro cell blocks the "
    "kernel (a --wait turn, nbclient, papermill); show the code in your answer instead (in JupyterLab, a turn "
    "without --wait can edit cells)"
)


CLOSED = (
    "the notebook was closed while this waited (its tab closed); nothing more was changed in it: the next turn "
    "reads it again when it is open"
)


#: what a Stop during a request leaves, by op: a review's changes the user accepted before it stay (each is
#: applied at its Accept), and so do the outputs of cells a run had run
STOPPED = {
    "read": "stopped by the user; nothing was changed in the notebook",
    "review": (
        "stopped by the user; a change the user accepted before the stop is in the notebook, the others are "
        "not: read the notebook again before changing it"
    ),
    "run": (
        "stopped by the user; the cells that ran before the stop keep their outputs: read the notebook to see them"
    ),
}


#: how long a withdrawn request waits for the front end to say what was decided before the withdrawal
WITHDRAW_WAIT_S = 2.0
#: how long a request made just after the comm was opened waits for a front end's hello (the turn that opened
#: it may call a cell tool before the front end's answer has crossed the wire)
HELLO_WAIT_S = 2.0


class Withdrawn(ToolError):
    """A request the kernel gave up (a Stop, or nobody answered in time). ``decided``: a review's changes the
    user decided before it, by their place in the request, as the front end said in answer to the cancel
    (each accepted one is in the document); None when the front end did not say (an older one, or one gone)."""

    def __init__(self, message: str, decided: dict[int, dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.decided = decided


class Unanswered(Withdrawn):
    """Nobody answered a request within its timeout (a review nobody decided: the user is away)."""

    def __init__(self, seconds: float, decided: dict[int, dict[str, Any]] | None = None) -> None:
        super().__init__(f"the notebook did not answer within {seconds:g} s; nothing was changed", decided)
        self.seconds = seconds


class Handle(Protocol):
    def send(self, data: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


#: a message from a front end, and who sent it (the client session of its comm message; None: not known)
OnMessage = Callable[[dict[str, Any], "str | None"], None]


class Transport(Protocol):
    #: replies reach the kernel only while its main thread is idle (ipykernel's comm messages)
    replies_on_main_thread: bool

    def open(
        self,
        data: dict[str, Any],
        on_message: OnMessage,
        on_close: Callable[[], None] = lambda: None,
    ) -> Handle: ...


class IpykernelTransport:
    """A comm opened by this kernel (``ipykernel.comm.Comm``): its messages from the front end reach
    ``on_message`` on the kernel's main thread, with the client session that sent each (its header's
    ``session``: every browser window's kernel connection has its own)."""

    replies_on_main_thread = True

    def open(
        self,
        data: dict[str, Any],
        on_message: OnMessage,
        on_close: Callable[[], None] = lambda: None,
    ) -> Handle:
        from ipykernel.comm import Comm

        comm = Comm(target_name=TARGET, data=data)

        def as_sent(_data: Any, subshell_id: Any) -> Any:
            return subshell_id

        # ipykernel 7.4 routes a front end's comm_msg to the subshell of the message the kernel was handling
        # when it last sent on the comm; a request sent from a turn's thread has an arbitrary parent (often a
        # widget's comm_msg, on a subshell since closed: "Unknown subshell_id", the reply dropped). The front
        # end sends on the main shell (docs/notebook-protocol.md): route its messages as they were sent.
        comm._reply_subshell_for = as_sent  # type: ignore[method-assign]  # an instance attribute, over the method

        def received(msg: dict[str, Any]) -> None:
            content = msg.get("content") if isinstance(msg, dict) else None
            payload = content.get("data") if isinstance(content, dict) else None
            header = msg.get("header") if isinstance(msg, dict) else None
            sender = header.get("session") if isinstance(header, dict) else None
            if isinstance(payload, dict):
                on_message(payload, sender if isinstance(sender, str) and sender else None)

        comm.on_msg(received)
        comm.on_close(lambda _msg: on_close())  # the panel closed: no document answers on this comm any more
        return comm


class _Pending:
    __slots__ = ("done", "reply", "sender")

    def __init__(self, sender: str | None) -> None:
        self.done = threading.Event()
        self.reply: dict[str, Any] | None = None
        #: the client session of the front end it was sent to: only its reply counts (None: not known)
        self.sender = sender


class Channel:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        #: the front ends that said hello on the open comm, by client id, in the order they did
        self.hellos: dict[str, dict[str, Any]] = {}
        self._senders: dict[str, str | None] = {}
        self._handle: Handle | None = None
        self._path: str | None = None
        self._opened_at = float("-inf")
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._hello_came = threading.Condition(self._lock)

    @property
    def attached(self) -> bool:
        """A panel with the extension answered for this notebook."""
        return bool(self.hellos)

    @property
    def hello(self) -> dict[str, Any] | None:
        """The hello of the front end a request names when no other is asked for (the first that said it)."""
        return next(iter(self.hellos.values()), None)

    def knows(self, client: str) -> bool:
        """Has the front end of this client (its id, or the session its messages come from) said hello?"""
        return self._key(client) is not None

    def open(self, path: str | None) -> None:
        """Open the comm (again): a page reload drops the front end's end, so a kernel that has heard nothing
        opens a new one; the older one is closed."""
        old, self._handle = self._handle, None
        with self._lock:
            self.hellos, self._senders = {}, {}
        if old is not None:
            try:
                old.close()
            except Exception:  # a comm whose kernel side is already gone: nothing left to close
                pass
        handle: Handle | None = None

        def closed() -> None:
            if handle is not None and self._handle is handle:
                self._gone(handle)

        self._path, self._opened_at = path, time.monotonic()
        handle = self._handle = self.transport.open({"protocol": PROTOCOL, "path": path}, self.handle, closed)

    def reopen(self) -> None:
        """Open the comm again for the same notebook (a window that came after it was opened says hello then)."""
        self.open(self._path)

    def _gone(self, handle: Handle) -> None:
        """The front end's end of ``handle`` went (its panel closed): nothing is attached, and what waits on
        it is answered at once (the next turn opens the channel again)."""
        with self._lock:
            if self._handle is not handle:
                return
            self._handle, self.hellos, self._senders = None, {}, {}
            waiting, self._pending = self._pending, {}
        for pending in waiting.values():
            pending.reply = {"ok": False, "closed": True}
            pending.done.set()

    def handle(self, data: dict[str, Any], sender: str | None = None) -> None:
        """A message from the front end (the comm's handler); ``sender``: the client session it came from."""
        kind = data.get("type")
        if kind == "hello" and data.get("protocol") == PROTOCOL:
            client = data.get("client")
            key = client if isinstance(client, str) and client else sender or str(data.get("panel") or "")
            with self._lock:
                self.hellos[key], self._senders[key] = dict(data), sender
                self._hello_came.notify_all()
        elif kind == "reply" and isinstance(data.get("id"), int):
            with self._lock:
                pending = self._pending.get(data["id"])
                if pending is None or (pending.sender and sender and sender != pending.sender):
                    return  # a reply nobody waits for (timed out, cancelled), or from a front end not asked
                del self._pending[data["id"]]
            pending.reply = data
            pending.done.set()

    def _key(self, client: str | None) -> str | None:
        """The hello of ``client`` (named by its id or by the session it sends from), if it said one."""
        if client is None:
            return None
        if client in self.hellos:
            return client
        return next((key for key, sender in self._senders.items() if sender == client), None)

    def _blocked(self) -> bool:
        return self.transport.replies_on_main_thread and threading.current_thread() is threading.main_thread()

    def unavailable(self, to: str | None = None) -> str | None:
        """Why no front end can serve a request now, in one sentence; None when one can. Just after the comm
        was opened it waits a moment for the hello (of ``to``'s front end, when named) first."""
        if self._handle is None:
            return NO_FRONT_END
        if self._blocked():
            return BLOCKED if self.attached else UNANSWERED_BLOCKED
        deadline = self._opened_at + HELLO_WAIT_S
        with self._lock:
            while (not self.hellos or (to is not None and self._key(to) is None)) and time.monotonic() < deadline:
                self._hello_came.wait(max(0.0, deadline - time.monotonic()))
        return None if self.attached else NO_FRONT_END

    def _serving(self, to: str | None) -> tuple[str, dict[str, Any]] | None:
        """The front end that serves a request: ``to``'s when it said hello, else the first that did."""
        with self._lock:
            key = self._key(to)
            if key is None:
                key = next(iter(self.hellos), None)
            return None if key is None else (key, self.hellos[key])

    def request(
        self,
        op: str,
        *,
        timeout: float,
        abort: threading.Event | None = None,
        to: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Send one request to one front end (``to``'s, else the first to say hello) and wait for its reply
        (``ok: true``); :class:`ToolError` with one sentence for no front end, a blocked kernel, a timeout, a
        Stop, or the front end's own error."""
        reason = self.unavailable(to)
        handle, serving = self._handle, self._serving(to)
        if reason is not None or handle is None or serving is None:
            raise ToolError(reason or NO_FRONT_END)
        key, hello = serving
        number = next(self._ids)
        pending = _Pending(self._senders.get(key))
        with self._lock:
            self._pending[number] = pending
        addressed = {"to": key} if key else {}  # only the front end named serves it
        handle.send({"type": "request", "id": number, "op": op, **fields, **addressed})
        deadline = time.monotonic() + timeout
        while not pending.done.wait(0.05):
            stopped = abort is not None and abort.is_set()
            if stopped or time.monotonic() > deadline:
                answers = op == "review" and bool(hello.get("withdraws"))  # it says what was decided before
                decided = self._withdraw(number, pending, handle, key, answers=answers)
                if stopped:
                    raise Withdrawn(STOPPED.get(op, STOPPED["read"]), decided)
                # a page reload closes nothing: a front end that does not answer may be gone, so it is no longer
                # asked (the next turn opens the channel again when none is left; a live panel answers its hello)
                if self._handle is handle and decided is None:
                    with self._lock:
                        self.hellos.pop(key, None)
                        self._senders.pop(key, None)
                raise Unanswered(timeout, decided)
        reply = pending.reply or {}
        if reply.get("closed"):
            raise ToolError(CLOSED)
        if not reply.get("ok"):
            raise ToolError(f"the notebook refused: {reply.get('error') or 'no reason given'}")
        return reply

    def _withdraw(
        self, number: int, pending: _Pending, handle: Handle, key: str, *, answers: bool
    ) -> dict[int, dict[str, Any]] | None:
        """Cancel request ``number`` (sent to the front end of ``key``). A front end that says it ``withdraws``
        (``answers``) answers a cancelled review with what the user decided until then (``withdrawn``: the
        results so far, null for the undecided), read here; None when it does not say (within
        :data:`WITHDRAW_WAIT_S`), and for a read or a run."""
        says = answers and self._handle is handle
        if not says:
            with self._lock:
                self._pending.pop(number, None)
        self.cancel(number, key)
        if says:
            pending.done.wait(WITHDRAW_WAIT_S)
            with self._lock:
                self._pending.pop(number, None)
        reply = pending.reply if pending.done.is_set() else None  # the answer, or the user's last decision's
        if not (isinstance(reply, dict) and reply.get("ok") and isinstance(reply.get("results"), list)):
            return None
        return {k: r for k, r in enumerate(reply["results"]) if isinstance(r, dict)}

    def cancel(self, number: int, to: str = "") -> None:
        handle = self._handle
        if handle is not None:
            try:
                handle.send({"type": "cancel", "id": number, **({"to": to} if to else {})})
            except Exception:  # the comm closed meanwhile: the review went with it
                pass

    def close(self) -> None:
        handle, self._handle = self._handle, None
        with self._lock:
            self.hellos, self._senders = {}, {}
        if handle is not None:
            try:
                handle.close()
            except Exception:  # the kernel is shutting down: its comms go with it
                pass


__all__ = [
    "BLOCKED",
    "CLOSED",
    "HELLO_WAIT_S",
    "NO_FRONT_END",
    "PROTOCOL",
    "STOPPED",
    "TARGET",
    "UNANSWERED_BLOCKED",
    "Channel",
    "IpykernelTransport",
    "Transport",
    "Unanswered",
    "Withdrawn",
]
