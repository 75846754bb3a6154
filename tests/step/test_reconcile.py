"""Phase 1, `reconcile` and `number_new_messages`: the branch's state made to agree with the view the
app sends (removed messages forgotten, orphaned bookmarks noted, the turn advanced), and messages
seen for the first time numbered where the list has them."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from langmem_paging import page_messages
from langmem_paging.step.reconcile import number_new_messages, reconcile
from tests.support.harness import COUNTER
from tests.support.steps import long_turns, step_context

OPTIONS = {"boundary": "fixed_2", "policy": "fifo", "bookmark_share": 1.0, "text_counter": COUNTER}


def _paged_once():
    """A step that evicted some pages (shown as bookmarks) and left others resident."""
    history = [*long_turns(8), HumanMessage("What now?", id="q1")]
    first = page_messages(history, max_tokens=420, low_water_tokens=300, **OPTIONS)
    assert first.state.shown and first.state.pages
    return first


def test_reconcile_forgets_what_the_app_removed_and_notes_the_orphaned_bookmarks():
    first = _paged_once()
    shown_id, shown = next(iter(first.state.shown.items()))
    resident_id, resident = next(iter(first.state.pages.items()))
    gone = {shown.anchor, *resident.ids}
    view = [m for m in first.view if m.id not in gone] + [HumanMessage("Next question", id="q2")]
    ctx = step_context(view, max_tokens=420, state=first.state.to_value(), **OPTIONS)
    turn = ctx.state.turn

    reconcile(ctx)

    assert ctx.state.turn == turn + 1 and ctx.state.last_user == "q2"
    assert ctx.orphans == [shown_id]  # its bookmark left the view: the fold phase decides
    assert resident_id not in ctx.state.pages  # every message of it left: stored, no longer resident
    assert not gone & set(ctx.state.order)
    assert first.state.pages[resident_id].ids == resident.ids  # the input state is not mutated


def test_reconcile_keeps_the_turn_when_no_new_user_message_came():
    first = _paged_once()
    ctx = step_context(first.view, max_tokens=420, state=first.state.to_value(), **OPTIONS)
    turn = ctx.state.turn

    reconcile(ctx)

    assert ctx.state.turn == turn and ctx.orphans == [] and ctx.orphan_clusters == []
    assert ctx.state.pages.keys() == first.state.pages.keys()


def test_new_messages_put_first_by_a_rewrite_are_numbered_below_the_older_ones():
    first = _paged_once()
    summary = HumanMessage("Summary of what came before.", id="s")
    view = [summary, *first.view, HumanMessage("And then?", id="q2")]
    ctx = step_context(view, max_tokens=420, state=first.state.to_value(), **OPTIONS)
    reconcile(ctx)
    known = dict(ctx.state.order)

    number_new_messages(ctx)

    order = ctx.state.order
    assert order["s"] < min(known.values())  # a summary put first rebuilds first
    assert order["q2"] > max(known.values())  # the usual case: appended, numbered last
    assert {k: order[k] for k in known} == known  # what had an ordinal keeps it
