"""The LangGraph server tests' graph (`tests/support/langgraph.test.json`): the deployment
benchmark's scripted paging agent (`graphs/deploy_graph.py`): ``RECALL X`` makes the model call
``recall(page_ids=[X])``; small budget and pages, so paging starts within a few turns."""

from graphs.deploy_graph import paging as graph

__all__ = ["graph"]
