"""Two runs of the eval on one commit give the same contexts: the messages a session adds (the
question, the reader's recall call) have ids derived from what it asked, not random ones. A tool
call's id is counted like the provider counts it, so random ids (uuid4) moved a fold at the edge of
the budget: runs of one commit differed by a question or two on LoCoMo dev."""

from __future__ import annotations

from evals.conversation import to_messages
from evals.datasets.synthetic import generate
from evals.paging_method import PagingSession


def _contexts():
    conv = generate(n_turns=160, n_facts=4, seed=1, distractors=False, updates=0)
    session = PagingSession(budget=700, boundary="fixed_10", policy="lfu", reader="search")
    for message in to_messages(conv):
        session.add(message)
    return [session.ask(q.question) for q in conv.questions]


def test_two_sessions_over_one_conversation_ask_with_the_same_ids_and_get_the_same_contexts():
    first, second = _contexts(), _contexts()
    assert any(c.recalled for c in first), "the reader recalled"
    for a, b in zip(first, second, strict=True):
        assert [(m.id, m.content) for m in a.messages] == [(m.id, m.content) for m in b.messages]
        assert a.present == b.present and a.bookmark_tokens == b.bookmark_tokens
