"""Every reason a plan can be refused has its refusal, and each refusal names its group and says what to do."""

from __future__ import annotations

from drkit.core.consistency import DivergenceKind, TargetDivergence
from drkit.core.refusals import (
    Refusal,
    RefusalReason,
    active_group,
    lagging,
    no_reverse_flow,
    stale,
    stale_detail,
    target_diverged,
    unknown_group,
    untranslatable,
    untranslatable_back,
)

LOST = TargetDivergence(DivergenceKind.BELOW_SYNCED_END, "orders", "A.orders", 0, 100, 0)

EVERY = [
    unknown_group("g", checkpointed_later=True),
    unknown_group("g"),
    active_group("g", "B", ("c-1",)),
    target_diverged("g", LOST, "B", "A->B"),
    untranslatable("g", "orders", 0, 5),
    untranslatable_back("g", "A.orders", 0, 5, "A->B"),
    stale("g", stale_detail("orders", 0, 700.4, 600)),
    lagging("g", "orders", 0, "B->A", 3, 10),
    no_reverse_flow("g", {"b-only", "a-only"}, "B", "A"),
]


def test_every_reason_has_its_refusal() -> None:
    assert {r.reason for r in EVERY} == set(RefusalReason)
    assert all(isinstance(r, Refusal) and r.group == "g" and r.detail for r in EVERY)


def test_each_refusal_says_what_to_do() -> None:
    hints = ["later --as-of", "check the name", "stop those consumers", "restore the topic", "(nothing of", "no syncs"]
    hints += ["--allow-stale", "run the reverse mirror", "configure flow B->A"]
    assert [hint in r.detail for r, hint in zip(EVERY, hints, strict=True)] == [True] * len(EVERY)


def test_the_wording_names_what_was_seen() -> None:
    assert active_group("g", "B", ()).detail.endswith("(members joining); stop those consumers first")
    assert stale_detail("orders", 0, 700.4, 600) == "orders/0: checkpoint is 700s old (limit 600s)"
    assert "offsets on a-only, b-only on B" in no_reverse_flow("g", {"b-only", "a-only"}, "B", "A").detail
