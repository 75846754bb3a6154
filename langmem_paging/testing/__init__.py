"""Test utilities for paging agents without a model endpoint or a database.

- `ScriptedChatModel`: a chat model that answers from a script and records every prompt.
- `PagingThread`: a thread driven as an agent drives it (step, apply, recall through the real
  tool and reducers, overhead counted), for tests, benchmarks and evaluations.
- `FaultInjectingStore`: a store wrapper that fails chosen calls (by number, or at random with a
  seed; before the call reaches the store or after it landed), to test an agent's resilience;
  `StoreFault` is what it raises, `kill_at` and `wrap_checkpointer_puts` are crash-test hooks.
"""

from langmem_paging.testing.faults import FaultInjectingStore, StoreFault, kill_at, wrap_checkpointer_puts
from langmem_paging.testing.models import ScriptedChatModel
from langmem_paging.testing.thread import PagingThread

__all__ = [
    "FaultInjectingStore",
    "PagingThread",
    "ScriptedChatModel",
    "StoreFault",
    "kill_at",
    "wrap_checkpointer_puts",
]
