"""One waiting cluster as the watch hub sees it (service/watch_hub.py): its connections, its
writers to ask, and what it heard. Made by the cluster's loop for each wait between passes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from checker_core.core.model import NodeAddress

if TYPE_CHECKING:
    from checker_core.core.probes import ProbeFn, ProbeResult
    from checker_core.edges.backend import OpenAsk, Prober
    from checker_core.edges.held_ask import HeldAsk


class Watcher:
    """One waiting cluster: its connections, its writers to ask, and what it heard."""

    def __init__(
        self,
        prober: Prober,
        *,
        writers: tuple[NodeAddress, ...],
        question: ProbeFn | None,
        every_s: float,
        answer_budget_s: float,
        judge: Callable[[Mapping[NodeAddress, ProbeResult]], object | None],
    ) -> None:
        self.prober = prober
        self.writers = writers
        self.question = question
        self.every_s = every_s
        self.answer_budget_s = answer_budget_s
        self.judge = judge  # the answers' verdict: a trigger, or None when nothing changed
        self.asked = 0
        self.heard = threading.Event()
        # what ended the watch: the nodes whose connection their server closed, or the
        # answers' verdict
        self.closed: tuple[NodeAddress, ...] = ()
        self.found: object | None = None
        self.failed: Exception | None = None  # what broke the hub's turn
        self.leaving_by: float | None = None
        self.released = threading.Event()
        self.out: OpenAsk | HeldAsk | None = None
        # its writers' connections, held from its first round to its release (None: asked
        # round by round, as over TLS, or before its first round)
        self.held: HeldAsk | None = None
        self.hold_tried = False
        # its idle connections by descriptor, looked up again only when its prober's
        # connections changed (a question out or answered, one dropped, a late probe's)
        self.idle: dict[int, tuple[NodeAddress, object]] | None = None
        self.idle_at = -1
        # the facts of the last answers the judge found nothing in: the exchange gives back the
        # very facts object for an answer byte for byte the last one, and the judge reads
        # nothing but the facts, so the same objects again need no judging
        self.quiet_facts: tuple[object, ...] | None = None

    def judged(self, answers: Mapping[NodeAddress, ProbeResult]) -> object | None:
        """The judge's verdict on these answers; facts it found nothing in are not judged
        again."""
        facts = tuple(answers[n].facts if n in answers else None for n in self.writers)
        last = self.quiet_facts
        if last is not None and all(
            a is b and a is not None for a, b in zip(facts, last, strict=True)
        ):
            return None
        found = self.judge(answers)
        self.quiet_facts = facts if found is None else None
        return found

    def idle_now(self) -> dict[int, tuple[NodeAddress, object]]:
        changes = getattr(self.prober, "changes", None)
        if self.idle is None or changes is None or changes != self.idle_at:
            self.idle = self.prober.idle()
            self.idle_at = changes if changes is not None else -1
        return self.idle

    @property
    def asks(self) -> bool:
        return self.every_s > 0 and bool(self.writers)
