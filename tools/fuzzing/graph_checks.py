"""Graph cases, oracle checks: every prompt the model gets, the history after each run, recalls."""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from langmem_paging import PagingState
from langmem_paging.core.messages import METADATA_KEY, is_user_turn, tool_call_ids
from langmem_paging.core.records import page_number

from .oracles import (
    chat_problems,
    generous_protected,
    left_to_sibling,
    library_ids,
    order_label,
    over_budget_account,
    over_budget_unexplained,
    recall_structure_problems,
    same_messages,
    shows_page,
    stand_in_takers,
    stuck_label,
    tail_of,
    without_patches,
)
from .vocabulary import COUNTER


class GraphChecks:
    """The invariants of a graph case (`GraphCase` mixes this in; `fail` raises `FuzzFailure`)."""

    def check_prompt(self, prompt: list[BaseMessage]) -> None:
        """Every invariant of a prompt the model receives: a valid chat, within budget, the user's
        newest message shown."""
        p = self.p
        self.report.steps[f"graph-{p.kind}"] += 1
        tokens = COUNTER(prompt) + (self.tool_tokens if p.kind == "middleware" else 0)
        result = self.result_for(prompt)
        fallback = (
            result is not None and result != "error" and result.tokens_before == 0 and result.tokens == 0
        )
        if fallback:
            self.report.notes["graph steps unpaged after a store error (on_store_error=continue)"] += 1
        self.check_prompt_chat(prompt)
        self.check("within budget (graph)")
        if tokens > p.max_tokens and not fallback:
            self.check_prompt_over_budget(prompt, tokens, result)
        self.check_prompt_user(prompt, fallback)

    def result_for(self, prompt: list[BaseMessage]) -> Any:
        """The paging step whose view is `prompt` (the latest step when none matches)."""
        result = self.results[-1][1] if self.results else None
        body = (
            [m for m in prompt if not isinstance(m, SystemMessage)] if self.p.kind == "middleware" else prompt
        )
        for _thread_id, candidate in reversed(self.results):  # concurrent runs interleave their steps
            if candidate != "error" and (candidate.view == body or candidate.view == prompt):
                return candidate
        return result

    def check_prompt_chat(self, prompt: list[BaseMessage]) -> None:
        """A valid chat, unless the only problem is a call a failed tool run left unanswered."""
        self.check("valid chat (graph)")
        for problem, calls in chat_problems(prompt):
            if calls and calls <= self.dangling:
                self.flags.add("dangling-call")
                self.report.notes["prompt with a call left unanswered by a failed tool run"] += 1
                continue
            self.fail("prompt is not a valid chat (graph)", problem)

    def check_prompt_over_budget(self, prompt: list[BaseMessage], tokens: int, result: Any) -> None:
        """Over budget: the step said so, and what nothing may evict explains it."""
        p = self.p
        over = result is not None and result != "error" and result.over_budget
        if not over:
            self.fail(
                "prompt over budget with over_budget=False",
                f"{tokens} > {p.max_tokens} (messages {COUNTER(prompt)}, overhead {self.overhead})",
            )
        self.report.notes["graph over_budget prompts"] += 1
        account = over_budget_account(result, result.state.budget, COUNTER.count_message)
        if account is not None:
            self.fail("over budget, the step's account of what it kept is wrong (graph)", account)
        # the library's messages are the ones the state shows: a user's message carrying a copied
        # bookmark mark is still the newest user turn, protected with what follows it (seed 33)
        generous = generous_protected(
            [m for m in prompt if not isinstance(m, SystemMessage)],
            COUNTER.count_message,
            set(getattr(result, "recalled_in", set())) | stand_in_takers(result, result.stand_ins_in),
            library_ids(result.state),
        )
        if over_budget_unexplained(tokens, generous, p.max_tokens, p.low_water, self.overhead):
            self.fail(
                "over budget not explained by what is protected (graph)"
                + stuck_label(result.state, COUNTER.count_message),
                f"tokens={tokens} max={p.max_tokens} overhead={self.overhead} protected={generous}",
            )

    def check_prompt_user(self, prompt: list[BaseMessage], fallback: bool) -> None:
        """The user's newest message is in the prompt, as sent (unless the step fell back unpaged)."""
        newest = [m for m in prompt if is_user_turn(m)]
        self.check("newest user message shown (graph)")
        want = self.expect_user
        if (
            want is None
            or fallback
            or any(m.id == want.id and m.content == want.content and m.type == want.type for m in prompt)
        ):
            return
        label = " (it carries library metadata)" if METADATA_KEY in want.additional_kwargs else ""
        shown = next((m for m in prompt if m.id == want.id), None)
        self.fail(
            "new user message hidden from the model (graph)" + label,
            f"{want.id} not in prompt{' (a bookmark has its id)' if shown is not None else ''}; newest "
            f"shown {newest[-1].id if newest else None}; {len(self.returned)} model calls into the turn",
        )

    def check_after_run(self, thread, inputs, expected, error) -> None:
        """After a run: nothing earlier lost, the user's message and the model's answers kept, the
        run's recalls sound, no page record rewritten; a finished run's checkpoint becomes a snapshot."""
        after = self.state_of(thread)
        history = self.rebuild(thread, after.values)
        self.note_dangling(history)
        tail = self.check_history_grows(history, inputs, expected, error, after.values)
        self.check_answers_kept(tail)
        for rthread, state, kwargs, answer in self.recalls:
            self.check_recall(rthread, state, kwargs, answer)
        self.recalls = []
        self.check("page records never rewritten (graph)")
        if self.store.rewrites:
            self.fail("page record rewritten with other content (graph)", "; ".join(self.store.rewrites[:3]))
        checkpoint = after.config["configurable"]["checkpoint_id"]
        if error is None and not after.next:
            # a failed run's head shows the successful tasks' pending writes, which a checkpoint read
            # by id does not: only finished runs are snapshots
            self.snapshots[thread][checkpoint] = history
        self.heads[thread] = checkpoint

    def note_dangling(self, history: list[BaseMessage]) -> None:
        """Remember calls left unanswered: dangling tool calls (a failed tool run) are LangGraph's,
        not paging's."""
        answered = {m.tool_call_id for m in history if isinstance(m, ToolMessage)}
        for m in history:
            for c in tool_call_ids(m):
                if c not in answered:
                    self.dangling.add(c)

    def check_history_grows(self, history, inputs, expected, error, values: dict) -> list[BaseMessage]:
        """The rebuilt history is `expected` then what the run added, the user's message among it;
        returns what the run added."""
        self.check("history only grows (graph lossless)")
        grown = without_patches(history, expected)
        diff = same_messages(grown[: len(expected)], expected)
        if diff:
            self.fail(
                "not lossless (graph): the history lost or changed earlier messages"
                + (self.diagnose_loss(values) or order_label(grown, expected + tail_of(grown, expected))),
                diff + (f" [after injected error: {error}]" if error else ""),
            )
        tail = grown[len(expected) :]
        if inputs[-1].id not in [m.id for m in tail]:
            self.fail(
                "not lossless (graph): the user message is missing" + self.diagnose_loss(values),
                f"{inputs[-1].id} not in the new part of the history",
            )
        return tail

    def check_answers_kept(self, tail: list[BaseMessage]) -> None:
        """Every AI message the model returned this run is in the history."""
        marks = [m.additional_kwargs.get("fz") for m in tail if isinstance(m, AIMessage)]
        for m in self.returned:
            self.check("model answers kept")
            if m.additional_kwargs.get("fz") not in marks:
                self.fail(
                    "not lossless (graph): an AI message the model returned is missing",
                    f"{m.additional_kwargs.get('fz')}",
                )

    def diagnose_loss(self, values: dict) -> str:
        st = PagingState.from_value(values.get("paging"))
        ids = {m.id for m in values.get("messages", [])}
        if self.p.mode == "replace" and any(s.anchor not in ids for s in st.shown.values()):
            return " (a page evicted without a bookmark: its anchor left the context)"
        return ""

    def check_recall(self, thread, state, kwargs, answer) -> None:
        branch = PagingState.from_value(state)
        cap = self.paging.pager.room_for(branch)  # one call and no calling message: the largest room
        content = answer.content
        self.check("recall within cap (graph)")
        if COUNTER.count_text(content) > cap:
            self.fail(
                "recall over its size cap (graph)"
                + (
                    " (the 'size cap reached' notice is not counted)"
                    if "[recall size cap of" in content
                    else ""
                ),
                f"{COUNTER.count_text(content)} > {cap}; args={str(kwargs)[:100]}",
            )
        self.check("recall delimited (graph)")
        history = {m.id: m for m in kwargs.get("history") or [] if m.id}  # view mode shows edits
        problems = recall_structure_problems(content, lambda pid: self.oracle.get(thread, pid), history)
        if problems:
            echo = "Nothing paged out matches the query" in content[: problems[0].count("") and 400]
            self.fail(
                "recall text not delimited (graph)" + (" (the note echoes the query)" if echo else ""),
                problems[0],
            )
        self.check_other_threads(thread, content)
        self.check_foreign_pages(thread, content, kwargs, branch)

    def check_other_threads(self, thread: str, content: str) -> None:
        """A recall on `thread` shows no text of another thread's."""
        for other, words in self.words.items():
            if other != thread:
                self.check("no read of another thread (graph)")
                if words.tag in content:
                    self.fail(
                        "recall read another thread's pages (graph)",
                        f"{thread} read {other}: {content[:300]!r}",
                    )

    def check_foreign_pages(self, thread: str, content: str, kwargs: dict, branch: PagingState) -> None:
        """A page id the recall asked for that `branch` does not own shows no page (an abandoned one no
        text, unless a sibling branch's page is what it left out)."""
        asked = kwargs.get("page_ids") if isinstance(kwargs.get("page_ids"), list) else []
        for pid in asked:
            if (
                isinstance(pid, str)
                and re.fullmatch(r"p[1-9]\d*", pid)
                and not branch.owns("p", page_number(pid))
            ):
                self.check("foreign id is no such page (graph)")
                if shows_page(content, pid):
                    self.fail("recall returned a page this branch does not own (graph)", f"{pid}")
                if (
                    pid in self.abandoned.get(thread, set())
                    and "No such page" not in content
                    and not content.startswith("recall failed")
                    and not left_to_sibling(content, pid, kwargs.get("served") or {})
                ):
                    self.fail("abandoned branch page visible (graph)", f"{pid}: {content[:200]!r}")

    def final_checks(self, thread: str) -> None:
        self.check("every checkpoint rebuilds the same (graph)")
        items = list(self.snapshots[thread].items())
        for checkpoint, history in items[:: max(1, len(items) // 6)]:
            state = self.state_of(thread, checkpoint)
            again = self.rebuild(thread, state.values)
            diff = same_messages(again, history)
            if diff:
                self.fail("an older checkpoint no longer rebuilds the same history (graph)", diff)
