"""Pure cases, oracle checks: what must hold after each paging step, recall and at the end."""

from __future__ import annotations

import json
import re

from langchain_core.messages import ToolMessage

from langmem_paging import PagingState
from langmem_paging.core.library_messages import tool_result_stub
from langmem_paging.core.messages import METADATA_KEY, library_mark
from langmem_paging.core.records import page_number
from langmem_paging.testing.conformance import valid_chat as assert_valid_chat

from .oracles import (
    chat_problems,
    generous_protected,
    library_ids,
    library_tokens,
    order_label,
    over_budget_account,
    over_budget_unexplained,
    recall_structure_problems,
    same_messages,
    shows_page,
    stand_in_takers,
    stuck_label,
)
from .vocabulary import COUNTER


class PureChecks:
    """The invariants of a pure case (`PureCase` mixes this in; `fail` raises `FuzzFailure`)."""

    def check_result(self, result, view, resident_before) -> None:
        """Every invariant of one step's result (`view`: what it paged; `resident_before`: its pages)."""
        tokens = sum(self.count(m) for m in result.view)
        self.check_counted_and_valid(result, tokens)
        self.check_budget(result, tokens)
        if result.tokens_before > self.p.max_tokens and (result.evicted or result.folded):
            self.check_never_grows(result, view)
        self.check_user_shown(result)
        if self.p.large_result_share is not None:
            self.check_large_results(result, view)
        self.check_ids(result, resident_before)

    def check_counted_and_valid(self, result, tokens: int) -> None:
        p = self.p
        self.check("tokens counted right")
        if tokens != result.tokens:
            self.fail("result.tokens is wrong", f"result.tokens={result.tokens} recount={tokens}")
        self.check("valid chat")
        if not chat_problems(self.ref):
            try:
                assert_valid_chat(result.view)  # tests/harness: the providers' tool-pair rules
            except AssertionError as error:
                self.fail(
                    "prompt is not a valid chat",
                    f"{error} ({chat_problems(result.view)[:1]}, {p.boundary}/{p.policy})",
                )

    def check_budget(self, result, tokens: int) -> None:
        """Within budget, or over it with `over_budget` set and explained by what nothing may evict."""
        p, count = self.p, self.count
        budget = p.max_tokens
        self.check("within budget")
        if tokens > budget and not result.over_budget:
            self.fail("over budget with over_budget=False", f"{tokens} > {budget}")
        if not result.over_budget:
            return
        self.report.notes["pure over_budget steps"] += 1
        self.check("over budget explained")
        before = PagingState.from_value(self.value)
        account = over_budget_account(result, budget, count)
        if account is not None:
            self.fail("over budget, the step's account of what it kept is wrong", account)
        generous = generous_protected(
            result.view,
            count,
            set(before.recalled) | stand_in_takers(result, library_ids(before)),
            library_ids(result.state),
        )
        if over_budget_unexplained(tokens, generous, budget, p.low_water):
            self.fail(
                "over budget not explained by what is protected" + stuck_label(result.state, count),
                f"tokens={tokens} budget={budget} protected(generous)={generous} "
                f"reported protected={result.protected_tokens} "
                f"library={library_tokens(result.view, count)}",
            )

    def check_never_grows(self, result, view) -> None:
        """A step that evicted or folded over budget never leaves a bigger context than it was given."""
        count = self.count
        self.check("paging never grows the context")
        if result.tokens <= result.tokens_before:
            return
        before = {m.id: m for m in view}
        stubs = [
            m
            for m in result.view
            if "paged_result" in library_mark(m)
            and m.id in before
            and "paged_result" not in library_mark(before[m.id])
            and count(m) > count(before[m.id])
        ]
        self.fail(
            "paging made the context bigger"
            + (
                " (a tool result stub longer than the result)"
                if stubs
                else ""
                if result.evicted
                else " (folding alone: a cluster bookmark grew)"
            ),
            f"{result.tokens_before} -> {result.tokens}",
        )

    def check_user_shown(self, result) -> None:
        """The model sees the user's new message."""
        in_view = {(m.id, m.type, repr(m.content)) for m in result.view}
        for user in self.pending_user:
            if user.id in self.edits_in_place:
                self.report.notes["a reused id edits an old message in place (no stand-in had it)"] += 1
                continue
            self.check("new user message shown")
            if (user.id, user.type, repr(user.content)) not in in_view:
                self.fail("new user message hidden from the model", f"id={user.id} mode={self.p.mode}")

    def check_large_results(self, result, view) -> None:
        """Large tool results become stubs naming the tool and its args."""
        count = self.count
        limit = max(1, int(self.p.max_tokens * self.p.large_result_share))
        by_id = {m.id: m for m in result.view}
        for m in view:
            if (
                isinstance(m, ToolMessage)
                and m.id
                and not library_mark(m)
                and count(m) > limit
                and not (isinstance(m.artifact, dict) and METADATA_KEY in m.artifact)
            ):
                self.check("large result paged on arrival")
                self.check_stub(m, by_id.get(m.id), view, limit)

    def check_stub(self, m: ToolMessage, shown, view, limit: int) -> None:
        """`m` (a large tool result) as the step shows it (`shown`; None: not in the view)."""
        count = self.count
        call = next(
            (c for x in view for c in getattr(x, "tool_calls", None) or [] if c.get("id") == m.tool_call_id),
            None,
        )
        if count(tool_result_stub("p999999", m, call, count(m))) >= count(m):
            return  # a stub no shorter than the result is never written (B6)
        if shown is None:
            return
        if shown.content == m.content:
            self.fail("large tool result not paged", f"{count(m)} tokens > {limit}, id {m.id}")
        if m.name and m.name not in str(shown.content):
            self.fail("tool result stub does not name the tool", str(shown.content)[:200])
        if call is not None:
            self.check("tool result stub names the args")
            args = json.dumps(call["args"], sort_keys=True, default=str, ensure_ascii=False)[:40]
            if args not in str(shown.content):
                self.fail("tool result stub does not name the args", f"{args!r} not in {shown.content!r}")

    def check_ids(self, result, resident_before) -> None:
        """Page and cluster ids are never reused for other content (a resident page may be re-stored)."""
        for page in result.pages:
            self.check("page ids never reused")
            old = self.page_digests.get(page.id)
            if old is not None and old != page.digest and page.id not in resident_before:
                self.fail("page id reused", f"{page.id}: {old} -> {page.digest}")
            if old is not None and old != page.digest:
                self.report.notes["resident page re-stored after an edit"] += 1
            self.page_digests[page.id] = page.digest
        for node in result.nodes:
            self.check("cluster ids never reused")
            old = self.node_digests.get(node.id)
            if old is not None and old != node.digest:
                self.fail("cluster id reused", f"{node.id}")
            self.node_digests[node.id] = node.digest

    def check_recall(self, content: str, args: dict, branch: PagingState, cap: int) -> None:
        """`cap`: the room the pager gave the result (the budget net of what is protected, within
        `recall_max_tokens`; `recall_max_tokens` or half the budget before any step measured)."""
        self.check("recall within cap")
        if COUNTER.count_text(content) > cap:
            self.fail(
                "recall over its size cap"
                + (
                    " (the 'size cap reached' notice is not counted)"
                    if "[recall size cap of" in content
                    else ""
                ),
                f"{COUNTER.count_text(content)} tokens > cap {cap}; args={str(args)[:120]}; "
                f"content={content[:200]!r}...{content[-300:]!r}",
            )
        self.check("recall delimited")
        problems = recall_structure_problems(content, self.get_page)
        if problems:
            echo = "Nothing paged out matches the query" in content[:400]
            self.fail(
                "recall text not delimited" + (" (the note echoes the query)" if echo else ""), problems[0]
            )
        if self.other_ids:
            self.check("no read of another thread")
            if self.other_tag in content:
                self.fail("recall read another thread's pages", f"args={args} content={content[:300]!r}")
        self.check_foreign_pages(content, args, branch)

    def check_foreign_pages(self, content: str, args: dict, branch: PagingState) -> None:
        """A page id the recall asked for that `branch` does not own shows no page (an abandoned one no text)."""
        asked = args.get("page_ids") if isinstance(args.get("page_ids"), list) else []
        for pid in asked:
            if not isinstance(pid, str) or not re.fullmatch(r"p[1-9]\d*", pid):
                continue
            if not branch.owns("p", page_number(pid)):
                self.check("foreign id is no such page")
                if shows_page(content, pid):
                    self.fail("recall returned a page this branch does not own", f"{pid}: {content[:300]!r}")
                if (
                    pid in self.abandoned
                    and "No such page" not in content
                    and not content.startswith("recall failed")
                ):
                    self.fail("abandoned branch page visible", f"{pid}: {content[:300]!r}")

    def check_lossless(self) -> None:
        self.check("lossless")
        rebuilt = self.rebuild()
        if self.collided:
            # an id reused by a new message: the unpaged reference replaced the old message in place;
            # require that nothing else was lost and the new version is there
            self.check("lossless with reused ids")
            want = [m for m in self.ref if m.id not in self.collided]
            got = [m for m in rebuilt if m.id not in self.collided]
            diff = same_messages(got, want)
            if diff:
                self.fail("history lost after an id was reused" + self.diagnose_loss(), diff)
            for m in self.ref:
                if m.id in self.collided and m not in rebuilt:
                    self.fail("history lost the new message with a reused id", f"{m.id}")
            return
        diff = same_messages(rebuilt, self.ref)
        if diff:
            self.fail("not lossless (pure)" + (self.diagnose_loss() or order_label(rebuilt, self.ref)), diff)

    def diagnose_loss(self) -> str:
        """Name the known cause of a loss, when it is one."""
        st = PagingState.from_value(self.value)
        ids = {m.id for m in self.msgs}
        if any(s.anchor not in ids for s in st.shown.values()):
            return " (a page evicted without a bookmark: its anchor left the context)"
        return ""

    def final_checks(self) -> None:
        self.check("old snapshots rebuild the same")
        for msgs, value, _, rebuilt in self.snapshots[:: max(1, len(self.snapshots) // 8)]:
            again = self.rebuild(msgs, value)
            diff = same_messages(again, rebuilt)
            if diff:
                self.fail("an older checkpoint no longer rebuilds the same history", diff)
