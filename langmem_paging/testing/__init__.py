"""Test utilities for paging agents without a model endpoint or a database.

- `ScriptedChatModel`: a chat model that answers from a script and records every prompt.
- `PagingThread`: a thread driven as an agent drives it (step, apply, recall through the real
  tool and reducers, overhead counted), for tests, benchmarks and evaluations.
"""

from langmem_paging.testing.models import ScriptedChatModel
from langmem_paging.testing.thread import PagingThread

__all__ = ["PagingThread", "ScriptedChatModel"]
