"""Test utilities for paging agents without a model endpoint or a database.

- `ScriptedChatModel`: a chat model that answers from a script and records every prompt.
"""

from langmem_paging.testing.models import ScriptedChatModel

__all__ = ["ScriptedChatModel"]
