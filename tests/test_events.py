"""A turn's observers in order (:class:`shiro_kernel.events.Pipe`): each event goes through every observer, and
what an observer returns in place of an event is what the observers after it see."""

from __future__ import annotations

from shiro_kernel.events import Event, Notice, Pipe, TextDelta


def _seen(name: str, log: list[tuple[str, str]]):
    def observe(event: Event) -> None:
        log.append((name, getattr(event, "text", type(event).__name__)))

    return observe


def test_every_observer_sees_every_event_in_the_order_of_the_list():
    log: list[tuple[str, str]] = []
    pipe = Pipe([_seen("record", log), _seen("view", log)])
    pipe(TextDelta("a"))
    pipe(TextDelta("b"))
    assert log == [("record", "a"), ("view", "a"), ("record", "b"), ("view", "b")]


def test_what_an_observer_returns_replaces_the_event_for_those_after_it():
    log: list[tuple[str, str]] = []

    def check(event: Event):
        if isinstance(event, TextDelta) and event.text == "42":  # one event becomes two
            return [event, Notice("1 number not found")]
        return None

    Pipe([_seen("before", log), check, _seen("after", log)])(TextDelta("42"))
    assert log == [("before", "42"), ("after", "42"), ("after", "1 number not found")]


def test_an_observer_that_returns_nothing_drops_the_event_and_the_last_return_is_dropped():
    log: list[tuple[str, str]] = []
    swallow = lambda event: []  # noqa: E731
    Pipe([swallow, _seen("after", log)])(TextDelta("x"))
    assert log == []
    Pipe([_seen("only", log), lambda event: [Notice("ignored")]])(TextDelta("y"))  # nobody after the last
    assert log == [("only", "y")]


def test_an_empty_pipe_takes_events():
    Pipe([])(TextDelta("z"))
