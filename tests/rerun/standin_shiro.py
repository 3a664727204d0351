"""``%load_ext standin_shiro``: a test-only ``%shiro`` that does what the integrated magic does first — replay
the cell's recorded turn through :func:`shiro_kernel.rerun.replay_cell.replay_cell` — and never asks a model.

The kernel tests use it to run the replay engine in real kernels (nbclient) before the magic is wired to
it: it finds the running cell's turn as the magic will (no cell id from nbclient, ordinals counted per
prompt), shows the replay's rows, figures, answer and ``replayed`` line, and leaves a turn bundle with the
replay fields, as the magic's view will. A cell with nothing to replay prints one line saying so.
"""

from __future__ import annotations

import os
from typing import Any

from IPython.display import display

from shiro_kernel.line import prompt_of as line_prompt
from shiro_kernel.magics import claim_question_lines
from shiro_kernel.notebook.mimes import TURN_MIME
from shiro_kernel.rerun.replay_cell import Refused, replay_cell
from shiro_kernel.rerun.sites import Ordinals
from shiro_kernel.store.paths import notebook_path
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.ui.render import TurnLog, to_bundle_json, to_markdown, to_text

NOTHING = "standin: no recorded turn to replay here (the real %shiro would ask the model)"


def load_ipython_extension(ip: Any) -> None:
    state: dict[str, Any] = {"cell_id": None}
    ordinals = Ordinals()
    seen: set[str] = set()

    def pre_run_cell(info: Any) -> None:
        state["cell_id"] = getattr(info, "cell_id", None)

    def run(prompt: str) -> None:
        log = TurnLog()
        outcome = replay_cell(
            ip,
            prompt=prompt,
            cell_id=state["cell_id"],
            ordinal=ordinals.next(prompt),
            setting=os.environ.get("SHIRO_REPLAY", "auto"),
            notebook_path=notebook_path(ip.user_ns),
            on_event=log.feed,
            store=SessionStore(),
            seen=seen,
        )
        if outcome is None:
            print(NOTHING)
            return
        if isinstance(outcome, Refused):
            print(outcome.text)
            return
        seen.add(outcome.found.turn_id)
        data = {**to_bundle_json(log, session_id=outcome.found.session_id), **outcome.found.fields}
        display({"text/plain": to_text(log), "text/markdown": to_markdown(log), TURN_MIME: data}, raw=True)

    def shiro(line: str, cell: str | None = None) -> None:
        prompt = line_prompt(line) or ""
        if cell is not None:
            prompt = "\n".join(p for p in (prompt, cell.strip()) if p)
        run(prompt)

    ip.events.register("pre_run_cell", pre_run_cell)
    ip.register_magic_function(shiro, "line_cell", "shiro")
    ip.input_transformers_cleanup.append(claim_question_lines)
