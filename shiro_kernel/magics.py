"""``%shiro`` and ``%%shiro``: a thin skin that parses the line, calls plain functions, and displays.

The line's grammar is :mod:`shiro_kernel.line`'s; ``%shiro?`` shows the help built from it with IPython's
``magic_arguments``, and :func:`claim_question_lines` keeps a ``%shiro … ?`` line a prompt.

A turn line first asks the rerun wing whether its cell's recorded turn replays without the model
(:mod:`shiro_kernel.rerun.turn_line`). A turn runs in the background with a live view when a widget frontend
is connected (:class:`~shiro_kernel.ui.live.LiveController`), else on this thread
(:func:`~shiro_kernel.ui.text_view.run_blocking`); slash commands go to :mod:`shiro_kernel.commands`.
A :class:`~shiro_kernel.errors.ShiroError` becomes one ``UsageError`` line here, and only here. What
``%load_ext`` sets up around the magics, and ``%unload_ext`` undoes, is :mod:`shiro_kernel.extension`'s.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand

from .config import Shiro

#: the one notice of a prompt whose text UTF-8 cannot carry (:func:`~shiro_kernel.text.encodable`)
SURROGATES_ESCAPED = (
    "the prompt held characters that are not valid text (a file name that is not UTF-8, as os.listdir returns "
    "it); they are escaped as such a name's bytes are shown, and the prompt sent is: {prompt}"
)

#: what a ``%shiro`` cell says when the agent's own ``notebook_run`` runs it (its run result tells the model)
RUN_BY_AGENT = (
    "shiro: not run — the agent's notebook_run reached this %shiro cell during its own turn, and a turn never "
    "starts inside another; run it yourself once that turn has ended"
)

if TYPE_CHECKING:
    from .agent import Agent
    from .line import Line
    from .rerun.sites import Ordinals
    from .ui.live import LiveController


def _declare(fn: Any) -> Any:
    """``%shiro``'s options as IPython's ``magic_arguments`` (for the help ``%shiro?`` shows), from the one grammar
    of the line (:data:`shiro_kernel.line.OPTIONS`)."""
    from IPython.core.magic_arguments import argument, magic_arguments

    from .line import OPTIONS

    declared: list[Any] = [magic_arguments()]
    for option in OPTIONS:
        dest = option.name.lstrip("-").replace("-", "_")
        if option.takes:
            declared.append(argument(option.name, dest=dest, metavar=option.takes, help=option.help))
        else:
            declared.append(argument(option.name, dest=dest, action="store_true", help=option.help))
    declared.append(
        argument("prompt", nargs="*", help="the prompt (it may end in '?'), or a slash command: /help lists them")
    )
    for decorator in reversed(declared):
        fn = decorator(fn)
    return fn


def parse_line(line: str) -> Line:
    """The line as the magic reads it (:func:`shiro_kernel.line.parse`); a line it refuses is one ``UsageError``.
    The line module is imported here, on the first ``%shiro``, not at ``%load_ext``."""
    from .errors import RequestError
    from .line import parse

    try:
        return parse(line)
    except RequestError as exc:
        raise UsageError(f"%shiro: {exc}") from None


_HELP_TAIL = """
With a widget frontend (JupyterLab) a turn runs in the background: the cell returns at once, the view
streams with Stop and approval buttons, and a %shiro typed meanwhile is queued. nbclient, papermill,
terminal IPython and --wait block. Settings: %config Shiro (e.g. %config Shiro.approval = "auto").
"""


@magics_class
class ShiroMagics(Magics):
    def __init__(self, shell: Any, config: Shiro) -> None:
        super().__init__(shell)
        self.settings = config
        self._agent: Agent | None = None
        self.controller: LiveController | None = None
        #: the id of the cell running now, where the front end sends one (JupyterLab, Notebook 7)
        self.cell_id: str | None = None
        #: how many turns with each prompt this kernel started (made on the first turn line)
        self._ordinals: Ordinals | None = None

    def remember_cell(self, info: Any) -> None:
        """IPython's ``pre_run_cell`` hook: which cell a ``%shiro`` line of it is typed in."""
        self.cell_id = getattr(info, "cell_id", None)

    @property
    def agent(self) -> Agent:
        if self._agent is None:
            from .agent import Agent

            self._agent = Agent(self.shell, self.settings)
        return self._agent

    @no_var_expand  # the prompt as typed: `{df.shape}` or `$x` are words for the model, never evaluated here
    @line_magic
    def shiro(self, line: str) -> None:
        """Run one agent turn: %shiro [options] PROMPT; %%shiro [options] takes the cell body as the prompt.
        A slash command (%shiro /todos) runs a command instead."""
        self._run(parse_line(line))

    @no_var_expand
    @cell_magic("shiro")  # type: ignore[arg-type]  # IPython types the decorator for functions, not methods
    def shiro_cell(self, line: str, cell: str) -> None:
        """%%shiro [options] — the cell body is the prompt (options as for %shiro)."""
        parsed = parse_line(line)
        self._run(parsed.with_prompt("\n".join(x for x in (parsed.prompt, cell.strip()) if x)))

    def _run(self, line: Line) -> None:
        from .errors import ShiroError
        from .text import encodable, one_line

        prompt = encodable(line.prompt)
        if prompt != line.prompt:  # e.g. a name from os.listdir that is not UTF-8: neither model nor disk takes it
            print(SURROGATES_ESCAPED.format(prompt=one_line(prompt, 160)), file=sys.stderr)
            line = line.with_prompt(prompt)
        try:
            self._dispatch(line)
        except ShiroError as exc:
            raise UsageError(f"%shiro: {exc}") from None

    def _dispatch(self, line: Line) -> None:
        """Act on a parsed line, as :attr:`Line.action` says and the tables :data:`WHILE_BUSY` and :data:`WHEN_IDLE`
        route it: a slash command (one its table says runs at once answered now), a turn (in the background with a
        widget frontend, else blocking), a session switch, flags for the session."""
        from . import commands
        from .config import agent_variant
        from .notebook import run_by_agent
        from .ui.session_text import started

        if run_by_agent(self.shell, self.cell_id):  # a turn's notebook_run reached this cell: no turn in a turn
            print(RUN_BY_AGENT)
            return
        agent, action = self.agent, line.action
        agent_variant(self.settings, line.agent)  # an unknown variant: a RequestError, one line (``_run``)
        self._session_flags(agent, line)
        live = self._controller()
        invoked = commands.parse(line.prompt) if action == "command" else None
        at_once = live or self.controller  # a front end asks silently: no cell metadata says it draws widgets
        if invoked is not None and invoked.when != commands.QUEUED and at_once is not None:
            if invoked.when == commands.TAKE_BACK:  # off this thread, refused while a turn runs (ui/live.py)
                at_once.take_back_in_cell(*commands.undo_args(invoked.arg))
            else:
                at_once.answer_at_once(functools.partial(commands.run, agent, invoked))
            return
        answer = functools.partial(commands.run, agent, invoked) if invoked is not None else None
        if action == "turn":
            line = self._placed(line)
            if not line.again and (live is None or not live.busy) and self._replayed(line):
                return
        if live is not None and live.busy:
            if not line.wait:
                WHILE_BUSY[action](live, line, answer)
                return
            live.wait_idle()  # wait for the running turn and everything queued before this one
        said = started(agent.current.start(new=line.new, cont=line.cont, resume=line.resume))
        if said:
            print(said)
        WHEN_IDLE[action](self, live, line, answer)

    def _placed(self, line: Line) -> Line:
        """A turn line with its place in the notebook (its cell, which of the cell's turns it is)."""
        from .rerun.sites import Ordinals
        from .rerun.turn_line import placed

        if self._ordinals is None:
            self._ordinals = Ordinals()
        return placed(line, self.cell_id, self._ordinals, self.agent.location.notebook)

    def _replayed(self, line: Line) -> bool:
        """The turn line's cell has a recorded turn to replay, and it was replayed (no model is asked)."""
        from .rerun.turn_line import replayed

        return replayed(self.shell, self.agent, self.settings, line)

    def _turn(self, live: LiveController | None, line: Line, answer: Answer | None) -> None:
        """A turn: in the background with a widget frontend (unless ``--wait``), else blocking here."""
        from .ui import kernel
        from .ui.kernel import has_frontend
        from .ui.text_view import HEADLESS_TURN_LIMIT_S, run_blocking

        if live is not None and not line.wait:
            live.submit_line(line)
            return
        limit: float | None = self.settings.turn_timeout_s
        if limit is None and live is None and not kernel.widget_frontend(self.shell, "auto"):
            limit = HEADLESS_TURN_LIMIT_S  # headless (nbclient, papermill, terminal IPython): never forever
        run_blocking(self.agent, line, live=has_frontend(self.shell), limit_s=limit)

    def _session_flags(self, agent: Agent, line: Line) -> None:
        """``--mute``, ``--no-memory`` and ``--memory`` hold for the rest of the session."""
        if line.mute:
            for warning in agent.memory.mute(line.mute):
                print(warning, file=sys.stderr)
        if line.memory is not None:
            print(agent.memory.set(line.memory))

    def _controller(self) -> LiveController | None:
        """The controller of background turns when they run here (a widget frontend), else None."""
        from .ui import kernel
        from .ui.live import LiveController

        if self.controller is not None and self.controller.busy:
            return self.controller  # a turn runs in the background: this line queues behind it, never beside it
        if not kernel.widget_frontend(self.shell, self.settings.frontend):
            return None
        if self.controller is None:
            self.controller = LiveController.for_kernel(self.agent, self.shell)
        elif self.controller.loop is None:
            self.controller.loop = kernel.running_loop(self.shell)
        return self.controller

    def kernel_ending(self, restart: bool) -> None:
        """The kernel shuts down and results of the stopped turn were told again (:mod:`~shiro_kernel.stops`):
        write them now (the process may be killed before its exit handlers run)."""
        from .errors import StoreError

        if self._agent is not None:
            self._agent.current.session.changed()
            try:
                self._agent.current.autosaver.flush()
            except StoreError:  # the footer already said the session is not saved
                pass

    def close(self) -> None:
        """Undo what running turns set up: stop them, write the session (``%unload_ext``)."""
        if self.controller is not None:
            self.controller.close()
            self.controller = None
        if self._agent is not None:
            self._agent.close()


#: a slash command's text, from the command table's runner (:func:`shiro_kernel.commands.run`)
Answer = Callable[[], str]


def _show(magics: ShiroMagics, live: LiveController | None, line: Line, answer: Answer | None) -> None:
    from IPython.display import display

    assert answer is not None  # a command line always has one
    text = answer()
    display({"text/plain": text, "text/markdown": f"```text\n{text}\n```"}, raw=True)


def _give_a_prompt(*_: object) -> None:
    from .line import GIVE_A_PROMPT

    raise UsageError(f"%shiro: {GIVE_A_PROMPT}")


def _queue(live: LiveController, line: Line, answer: Answer | None) -> None:
    live.submit_line(line, answer)


def _later(live: LiveController, line: Line, answer: Answer | None) -> None:
    print("(from the next turn on: the running turn keeps the memory it started with)")  # applied already


#: what a line does while a turn runs in the background (by :attr:`Line.action`): a command, a turn and a session
#: switch queue behind it (a command's answer and a switch are made when its place comes); flags were applied for
#: the turns that start from then on; an empty line is a usage error
WHILE_BUSY: dict[str, Callable[[LiveController, Line, Answer | None], None]] = {
    "command": _queue,
    "turn": _queue,
    "switch": _queue,
    "flags": _later,
    "empty": _give_a_prompt,
}
#: what a line does when no turn runs, after its session switch: a command's text is shown, a turn runs; switching
#: session or setting flags needs nothing more; an empty line is a usage error
WHEN_IDLE: dict[str, Callable[[ShiroMagics, LiveController | None, Line, Answer | None], None]] = {
    "command": _show,
    "turn": ShiroMagics._turn,
    "switch": lambda *_: None,
    "flags": lambda *_: None,
    "empty": _give_a_prompt,
}

_BUILDING = threading.Lock()
_parser: Any = None


def options_parser() -> Any:
    """The help of ``%shiro``'s options, built on first use: by the warm-up thread, the first cell that names
    ``shiro`` (a ``%shiro`` line, ``%shiro?``, ``%pinfo %shiro``), whichever comes first. Building it writes the
    help ``%shiro?`` shows (the options, the slash commands): argparse and its translations cost ~3 ms, more
    than the rest of ``%load_ext``, so they are not paid at load. Lines are parsed without it."""
    global _parser
    if _parser is None:
        with _BUILDING:
            if _parser is None:
                from .commands import help_text

                fn = _declare(ShiroMagics.shiro)
                fn.__doc__ = (fn.__doc__ or "") + _HELP_TAIL + "\n" + help_text()
                _parser = fn.parser  # last: other threads read it without the lock
    return _parser


def warm_options() -> None:
    """For the warm-up thread: build the help and parse a typical line (the line module's import). Pure: no
    state is touched."""
    options_parser()
    parse_line("--wait hi")


def claim_question_lines(lines: list[str]) -> list[str]:
    """IPython's input transformer for ``%shiro … ?`` lines (:func:`shiro_kernel.line.claim_questions`: a prompt,
    not a help request). A cell that names ``shiro`` first has the help built, complete before IPython reads a
    ``%shiro?``."""
    if not any("shiro" in line for line in lines):
        return lines
    options_parser()
    from .line import claim_questions

    return claim_questions(lines)
