"""An answer checked before it ends the turn (``Shiro.verify_answers``): numbers no output showed, or a question
about the data answered without looking at it, send the model back to compute — once per turn.

The numbers check (:mod:`.turn_check`) marks an answer's numbers that no tool output of the turn has; on its own
that is a mark the user reads after the turn. Measured with a small local model, most such answers were made up:
the model answered a data question from nothing. So where answers are verified, an answer without calls is looked
at before the turn ends:

* numbers in it that no output of the turn shows (the prompt's and the calls' own numbers aside, as the check
  does), or
* no call ran this turn while the prompt names data (a file of the project, a variable holding data — the
  workspace block's, :func:`~shiro_kernel.context.workspace.named`): a name or a category is never marked by the
  numbers check, so such an answer is taken as not looked up,

and then the model is told so in the next step's state note — shiro's words, not the user's: which numbers, and
to compute them with ``python`` or to say plainly that they were not computed. It is told once per turn: the
answer after that ends the turn whatever it says (and the numbers check still marks it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..transcript import Message
from .turn_check import for_turn

#: the numbers named in the note at most
LIMIT = 6


def verifies(setting: object, lean: bool) -> bool:
    """Whether a turn's answer is checked before it ends it: ``Shiro.verify_answers`` (``setting``), whose "auto"
    checks a lean turn's (a small local model's) only."""
    return lean if setting == "auto" else bool(setting)


@dataclass
class Verifier:
    """One turn's verification: ``prompt`` as typed, ``named``: the data the prompt names (files, variables)."""

    prompt: str
    named: Sequence[str] = ()
    #: the server's text calls are read (a lone ```python block runs): the note asks for one
    code_blocks: bool = False
    #: the note was given this turn (it is given once)
    told: bool = field(default=False, init=False)

    def note(self, messages: Sequence[Message]) -> str:
        """The note for the model when the turn's answer (the last of ``messages``, those the turn added) is not
        to end the turn yet; '' when it is (or the note was given already). Giving it marks it given."""
        if self.told:
            return ""
        text = self._note(list(messages))
        self.told = bool(text)
        return text

    def _note(self, messages: list[Message]) -> str:
        ran = any(m.role == "tool" for m in messages)
        # each number once, in the order the answer gives them (an answer may repeat one)
        missing = list(dict.fromkeys(str(n["text"]) for n in for_turn(messages, self.prompt) if not n.get("found")))
        if missing:
            shown = missing[:LIMIT] + ([f"{len(missing) - LIMIT} more"] if len(missing) > LIMIT else [])
            listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
            one = len(missing) == 1
            them, they, were = ("it", "it", "was") if one else ("them", "they", "were")
            return (
                f"[shiro, not the user] Your answer gives {listed}, which no output of this turn shows"
                f"{'' if ran else ' (no code ran)'}. Compute {them} {self._how(messages)} from the data and answer "
                f"again from the output; if {they} cannot be computed, say plainly that {they} {were} not computed."
            )
        if not ran and self.named:
            data = ", ".join(self.named)
            return (
                f"[shiro, not the user] You answered without looking at {data}: no code ran this turn. Compute the "
                f"answer {self._how(messages)} from the data and answer again from the output, or say plainly that "
                "you did not look."
            )
        return ""

    def _how(self, messages: list[Message]) -> str:
        """How the model is to compute: with the ``python`` tool, or, where the server's text calls are read, in a
        reply that is one ```` ```python ```` block — and if its answer held code beside other text, that such code
        did not run (only a reply that is the block alone is run: :mod:`~shiro_kernel.provider.textcalls`)."""
        if not self.code_blocks:
            return "with `python`"
        answer = messages[-1].text if messages else ""
        quoted = "```python" in answer or "```py\n" in answer
        return "in a reply that is one ```python block and nothing else" + (
            " (the code in your answer did not run: code beside other text is never run)" if quoted else ""
        )


__all__ = ["LIMIT", "Verifier", "verifies"]
