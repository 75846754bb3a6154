"""Pin the threads of BLAS, onnxruntime and torch for an eval run.

Each of them starts one thread per core by default; with `--processes` worker processes (or other
work on the machine) that oversubscribes the cores and every unit's wall time grows with the
contention, not with the method. A run gives each process ``cores // processes`` threads.
"""

from __future__ import annotations

import os
import sys

__all__ = ["THREAD_VARIABLES", "pin_threads", "threads_per_process"]

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
"""Read by BLAS libraries when they load (worker processes inherit them); `DefaultEmbedder` reads
``OMP_NUM_THREADS`` for onnxruntime's intra-op threads."""


def threads_per_process(processes: int, cores: int | None = None) -> int:
    """The cores shared evenly among `processes`, at least one thread each.

    Example:
        >>> threads_per_process(1, cores=2), threads_per_process(2, cores=2), threads_per_process(4, cores=2)
        (2, 1, 1)
    """
    return max(1, (cores or os.cpu_count() or 1) // max(1, processes))


def pin_threads(threads: int) -> int:
    """Limit BLAS, onnxruntime and torch to `threads` threads in this process and the ones it starts.

    Environment variables reach libraries that load later (spawned workers, onnxruntime sessions);
    threadpoolctl, when installed, limits the BLAS numpy already loaded; torch, when imported, is set too.

    Raises:
        ValueError: If `threads` is not a positive integer.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"`--threads` must be a positive integer, got {threads!r}.")
    for variable in THREAD_VARIABLES:
        os.environ[variable] = str(threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        threadpool_limits(limits=threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    return threads
