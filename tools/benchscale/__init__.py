"""The scale benchmark (`python tools/bench_scale.py --help` runs it), one job per module.

- `cli`: the command line (its docstring says what is measured), the parts run in turn, the JSON;
- `settings`: the budget, boundary and page size every part uses, and how trim_messages runs;
- `conversation`: the synthetic chat (Zipf-weighted words, topics, tool groups);
- `pagers`: SQLite file stores and pagers as a server opens them; `stats`: percentiles, RSS;
- `header`: git commit, dirty flag, machine, versions (the JSON's and the report's first line);
- parts: `steps` (per model call, with `lockstep` driving the threads and `profiling`), `recall`,
  `rss` (in a fresh process), `weight` (bytes per checkpoint), `quiet` (a call that pages nothing);
- `targets`: the issue's targets computed from the numbers (reported, never asserted);
- `render` and `render_steps`: the Markdown tables, built from `tables`.
"""

from .cli import main

__all__ = ["main"]
