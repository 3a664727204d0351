"""ui/asking.ask_user: the one wait for a click (an approval, a server's consent, another agent's call)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from shiro_kernel.ui.asking import Asked, ask_user


def kernel_thread() -> tuple[Callable[[Callable[[], None]], None], list[str]]:
    """A stand-in for the kernel's thread: posted jobs run at once on a thread of their own (as a click would)."""
    seen: list[str] = []

    def post(job: Callable[[], None]) -> None:
        threading.Thread(target=job).start()

    return post, seen


def test_the_first_answer_ends_the_wait_and_nothing_is_withdrawn():
    post, seen = kernel_thread()
    asked = ask_user(post, lambda answer: (answer("approve"), answer("deny")), lambda: seen.append("gone"), wait_s=5)
    assert asked == Asked("approve") and not asked.unanswered and seen == []


def test_a_stop_ends_the_wait_and_takes_the_question_back():
    post, seen = kernel_thread()
    abort = threading.Event()
    asked = ask_user(post, lambda answer: abort.set(), lambda: seen.append("gone"), wait_s=30, abort=abort)
    assert asked == Asked(None, stopped=True) and not asked.unanswered
    threading.Event().wait(0.1)
    assert seen == ["gone"]


def test_nobody_answering_is_unanswered_after_the_deadline():
    post, seen = kernel_thread()
    asked = ask_user(post, lambda answer: None, lambda: seen.append("gone"), wait_s=0.2)
    assert asked.unanswered and asked.answer is None
    threading.Event().wait(0.1)
    assert seen == ["gone"]
