"""A ``%shiro`` turn line in a rerun: the magic's two questions before it asks the model.

* :func:`placed` — the line with its cell and its place among this kernel's turns with the same prompt (the
  cell's own ordinal, read from the notebook, when the front end sends the cell's id; else the count the
  kernel keeps in :class:`~.sites.Ordinals`): what the recorded turn is found by;
* :func:`replayed` — the cell's recorded turn replayed without the model (:func:`~.replay_cell.replay_cell`),
  shown in a text view like a live turn's, or refused because the notebook is not trusted: True when the
  line is answered so, False to ask the model.

The magic decides when to ask (a turn line, not ``--again``, no background turn running) and keeps the
kernel's :class:`~.sites.Ordinals`; everything else is here. Imported on the first turn line, never by
``%load_ext``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import environment
from ..events import Recorded, TurnEnd, Usage
from ..ids import uuid7
from ..notebook.file import read_notebook_shared
from ..store.short_ids import short_id
from ..ui.kernel import has_frontend, run_by_a_program
from ..ui.text_view import TextView
from .replay_cell import Refused, replay_cell

#: said where a program runs the notebook without telling the kernel its file and no model can be asked: the
#: saved turns cannot be found, so the cells after them would fail on names the turns made
NOT_TOLD = (
    "shiro: the turns saved in this notebook cannot replay here: the program running it did not tell the kernel "
    "the notebook's file. Run it as `JPY_SESSION_NAME=$PWD/NAME.ipynb papermill NAME.ipynb OUT.ipynb` (or "
    "`jupyter nbconvert --execute`), or check it with `shiro check NAME.ipynb`, which does."
)

if TYPE_CHECKING:
    from ..agent import Agent
    from ..config import Shiro
    from ..line import Line
    from .sites import Ordinals


def placed(line: Line, cell_id: str | None, ordinals: Ordinals, notebook: Path | None) -> Line:
    """``line`` with the cell it runs in and its place among this kernel's turns with its prompt (counted in
    ``ordinals`` once per turn line, replayed or not)."""
    nb = None
    if cell_id is not None and notebook is not None:
        try:
            nb = read_notebook_shared(notebook)
        except (OSError, ValueError):  # no notebook on disk yet: the count in this kernel decides
            nb = None
    ordinal = ordinals.running(line.prompt, cell_id, nb)
    return replace(line, cell_id=cell_id, ordinal=ordinal)


def replayed(shell: Any, agent: Agent, settings: Shiro, line: Line) -> bool:
    """Replay the cell's recorded turn without the model when it has one that has not run in this kernel
    (Restart & Run All, papermill, a colleague's copy): True when the cell is answered so (replayed, or
    refused because the notebook is not trusted), False to ask the model."""
    found: dict[str, Any] = {}

    def details() -> dict[str, Any]:
        sid = found.get("session")
        return {
            "footer": "no model call",
            "session_id": sid,
            "resume": f"%shiro -r {short_id(sid)}" if sid else None,
        }

    view = TextView(live=has_frontend(shell), details=details)
    outcome = replay_cell(
        shell,
        prompt=line.prompt,
        cell_id=line.cell_id,
        ordinal=line.ordinal,
        setting="off" if settings.approval == "read-only" else settings.replay,
        notebook_path=agent.location.notebook,
        on_event=view,
        store=agent.current.store,
        seen=agent.turns_here,
        tools=agent.tools,
        end=False,
        current=agent.current.session if agent.current.started else None,
        checkpoint=agent.undo.checkpointer(uuid7()),  # the replayed calls are a turn of their own for undo
    )
    if outcome is None:
        if (
            agent.location.notebook is None
            and not (environment().api_key or settings.base_url)
            and run_by_a_program(shell)
        ):
            print(NOT_TOLD)  # the model is asked next and says there is no key: this says what would have worked
        return False
    if isinstance(outcome, Refused):
        print(outcome.text)
        return True
    agent.turns_here.add(outcome.found.turn_id)
    found["session"] = outcome.found.session_id
    view(Recorded(outcome.found.fields))  # the replay's bundle can be replayed again
    view(TurnEnd("replayed", Usage(0, 0, None)))
    return True


__all__ = ["NOT_TOLD", "placed", "replayed"]
