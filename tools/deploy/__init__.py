"""The deployment benchmark's parts (`tools/bench_deploy.py`): the graphs' servers, the plain
multi-process app with its per-thread lock, the clients and the checks run after each load."""
