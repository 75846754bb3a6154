"""What runs a step or a recall for a thread, between the pure step and the LangGraph adapters.

- `pager`: `Pager`, a configuration's steps and recalls with each call's store, index and encoding;
- `engine`: `StepEngine`, a step's flows: follow the thread's lifecycle, step, commit, index, report;
- `thread_io`: `ThreadIO`, the answers to every request of one thread (store, index, hooks, tracing);
- `lifecycle_step`: how a step follows a forget that landed since its state was built.
"""
