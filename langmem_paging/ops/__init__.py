"""What the operator tools show: a thread's pages, clusters and paging state, its lossless check,
and its records as portable JSON lines. Plain functions over a `PageStore` and checkpoints, so they
are tested without the command line (`langmem_paging.cli` only parses arguments and prints).

- `load_snapshots(saver, thread_id)` (`snapshots`): the thread's checkpoints on its latest branch;
  `load_branches(saver, thread_id)`: those and the others (forks, a concurrent run's lost writes);
  `paging_steps(snapshots)`: each model call's tokens against its budget;
- `inspect_thread(page_store, thread_id, snapshot)` (`inspection`): pages, clusters, and what the
  snapshot's paging state makes of them (resident, shown as a bookmark, folded into a cluster);
- `verify_thread(page_store, thread_id, snapshots)` (`verification`): rebuild the history from the
  latest checkpoint and the store and check it against every message the checkpoints ever held
  (with ``others=``, warn of messages only checkpoints off the branch held);
- `list_threads(store)` (`threads`): the threads a store holds records for, with their counts;
- `export_records` / `import_records` (`records`): a thread's store records, exactly;
- `acheck_ready(store)` (`readiness`): does the store, its search index and its claims answer;
- `where_text(page_store, thread_id, text)` (`where`): every place a thread still holds a text
  (store records, search index, checkpointed state), after `forget` or `delete`;
- `format_table`, `format_inspection`, `format_verification` (`text`): plain-text renderings.
"""

from langmem_paging.ops.formatting import format_inspection, format_table, format_verification
from langmem_paging.ops.inspection import (
    ClusterRow,
    Inspection,
    PageRow,
    RecallRow,
    SnapshotInfo,
    cluster_roots,
    inspect_thread,
)
from langmem_paging.ops.portable import (
    export_records,
    import_records,
    list_items,
    record_counts,
    without_ttl_refresh,
)
from langmem_paging.ops.readiness import Readiness, acheck_ready
from langmem_paging.ops.snapshots import (
    Branches,
    PagingStep,
    Snapshot,
    load_branches,
    load_snapshots,
    paging_steps,
)
from langmem_paging.ops.threads import ThreadRow, list_threads, thread_label, thread_of_label
from langmem_paging.ops.verification import Issue, Verification, verify_thread
from langmem_paging.ops.where import Place, where_text

__all__ = [
    "Branches",
    "ClusterRow",
    "Inspection",
    "Issue",
    "PageRow",
    "PagingStep",
    "Place",
    "Readiness",
    "RecallRow",
    "Snapshot",
    "SnapshotInfo",
    "ThreadRow",
    "Verification",
    "acheck_ready",
    "cluster_roots",
    "export_records",
    "format_inspection",
    "format_table",
    "format_verification",
    "import_records",
    "inspect_thread",
    "list_items",
    "list_threads",
    "load_branches",
    "load_snapshots",
    "paging_steps",
    "record_counts",
    "thread_label",
    "thread_of_label",
    "verify_thread",
    "where_text",
    "without_ttl_refresh",
]
