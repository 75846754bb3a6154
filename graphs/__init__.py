"""Ready LangGraph graphs with paging: `create_paging_agent`, and the demo graph for `langgraph.json`."""

from graphs.agent import create_paging_agent

__all__ = ["create_paging_agent"]
