"""Ready LangGraph graphs with paging: the demo graph for `langgraph.json` and the server tests' graph.

`create_paging_agent` is `langmem_paging.create_paging_agent` (re-exported for older imports).
"""

from langmem_paging.integrations.agents import create_paging_agent

__all__ = ["create_paging_agent"]
