"""Numbers of an answer, anchored to the tool outputs they came from (issue 28).

When a turn ends, each number its answer states as a result is looked up in what the turn's tools returned
(their output text and what they displayed); a number found nowhere is marked ⚠ in every rendering, and the
model is told of it at its next turn. One concept per module:

* what the answer claims — :mod:`.claims`: the numbers to check in the model's text (:class:`~.claims.Claim`,
  :func:`~.claims.find_numbers`), read as the reader sees it rendered (:mod:`.visible`);
* what the outputs hold — :mod:`.tool_outputs`: the texts of a tool result that are read, and their numbers,
  indexed once as the calls end (:class:`~.tool_outputs.OutputIndex`);
* how a claim is matched against them — :mod:`.matching`: the output values that give a claim, the nearest
  one as its evidence (:class:`~.matching.Anchor`);
* which text is the answer — :mod:`.answer`: the last block of text, by the rule the views draw their log
  with (:func:`~.answer.ends_block`);
* the turn's check — :mod:`.turn_check`: :func:`~.turn_check.check_turn` (the turn bundle's ``numbers``),
  the per-turn follower (:class:`~.turn_check.TurnNumbers`, wired by :class:`~.turn_check.LastAnswer`),
  the user's line and the note for the model's next turn.

The renderings that mark the numbers are the views' (:mod:`shiro_kernel.ui.marks`). The package imports
nothing of the project but :mod:`shiro_kernel.transcript` and :mod:`shiro_kernel.events`.
"""
