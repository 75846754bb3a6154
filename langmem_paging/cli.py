"""``langmem-paging``: look at, check, move and delete a thread's pages.

    langmem-paging threads --store sqlite:///pages.sqlite [--json]
    langmem-paging inspect THREAD --store sqlite:///pages.sqlite [--json]
    langmem-paging show THREAD p3 [--json]
    langmem-paging verify THREAD [--json]         # exit 0: lossless, 1: not, 2: no checkpoints to verify
    langmem-paging export THREAD [--out thread.jsonl]
    langmem-paging import thread.jsonl [--thread NEW_ID]
    langmem-paging delete THREAD [--yes] [--with-checkpoints]
    langmem-paging forget THREAD MESSAGE_ID [--yes]
    langmem-paging where THREAD --text "4111 1111"   # exit 0: nowhere, 1: lists where it still lives
    langmem-paging report THREAD --out report.html

Stores and checkpointers are named by URI (``--store``, default ``$LANGMEM_PAGING_STORE``):
``sqlite:///relative.sqlite``, ``sqlite:////absolute.sqlite``, ``postgresql://user@host:port/db``.
Checkpoints are read from the same URI unless ``--checkpoints URI`` (or ``none``) says otherwise.
Exit codes: 0 done, 1 not lossless / not found (a thread with no store records and no checkpoints
is "no such thread"), 2 bad arguments or an unreachable store.

This module only parses arguments and prints; what it shows comes from `langmem_paging.ops`
and `langmem_paging.ops.report`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from langmem_paging import __version__
from langmem_paging.core.messages import dump_messages
from langmem_paging.core.records import Page
from langmem_paging.core.tokens import OFFLINE_ENCODINGS, TokenCounter
from langmem_paging.index.defaults import default_index
from langmem_paging.ops import (
    Branches,
    Snapshot,
    export_records,
    format_inspection,
    format_table,
    format_verification,
    import_records,
    inspect_thread,
    list_threads,
    load_branches,
    load_snapshots,
    paging_steps,
    record_counts,
    verify_thread,
    where_text,
    without_ttl_refresh,
)
from langmem_paging.storage.backends import BackendError, open_checkpointer, open_store
from langmem_paging.storage.page_store import PageStore

__all__ = ["main"]

STORE_ENV = "LANGMEM_PAGING_STORE"
CHECKPOINTS_ENV = "LANGMEM_PAGING_CHECKPOINTS"


class _Fail(Exception):
    """Stop with a message on stderr and an exit code."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def plain(text: str) -> str:
    """Docstring text for a terminal: reStructuredText literals (````x````) and roles (```x```) shown bare.

    Example:
        >>> plain("Named by URI (``--store``, default ``$LANGMEM_PAGING_STORE``); see `inspect_thread`.")
        'Named by URI (--store, default $LANGMEM_PAGING_STORE); see inspect_thread.'
    """
    return re.sub(r"``(.+?)``|`([^`]+)`", lambda m: m.group(1) or m.group(2), text)


def shown_uri(uri: str) -> str:
    """`uri` with any password replaced by ``***``, for messages.

    Example:
        >>> shown_uri("postgresql://app:s3cret@db:5432/pages"), shown_uri("sqlite:///pages.sqlite")
        ('postgresql://app:***@db:5432/pages', 'sqlite:///pages.sqlite')
    """
    parts = urllib.parse.urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        default=os.environ.get(STORE_ENV),
        help=f"store URI: sqlite:///file.sqlite, sqlite:////abs/file.sqlite, postgresql://... "
        f"(default ${STORE_ENV})",
    )
    common.add_argument(
        "--checkpoints",
        default=os.environ.get(CHECKPOINTS_ENV),
        help="checkpointer URI, or 'none' (default: the store's URI, if it holds checkpoints)",
    )
    json_flag = argparse.ArgumentParser(add_help=False)
    json_flag.add_argument("--json", action="store_true", help="print JSON instead of text")
    encoding = argparse.ArgumentParser(add_help=False)
    encoding.add_argument(
        "--encoding",
        default="cl100k_base",
        choices=OFFLINE_ENCODINGS,
        help="tokenizer the agent's recall results were rendered with (default cl100k_base; "
        "o200k_base for gpt-4o-family models)",
    )

    parser = argparse.ArgumentParser(
        prog="langmem-paging",
        description="Look at, check, move and delete the pages of a langmem-paging thread.",
        epilog=plain(__doc__.split("\n\n")[2]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"langmem-paging {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser(
        "threads",
        parents=[common, json_flag],
        help="the threads the store holds pages for, with their page counts",
    )

    p = sub.add_parser(
        "inspect", parents=[common, json_flag], help="a thread's pages, clusters and paging state"
    )
    p.add_argument("thread")
    p.add_argument(
        "--width", type=int, default=60, help="cut bookmarks to this many characters (text output)"
    )

    p = sub.add_parser("show", parents=[common, json_flag], help="one page's exact messages (or a cluster)")
    p.add_argument("thread")
    p.add_argument("page_id", help="a page id (p3) or a cluster id (c2)")

    p = sub.add_parser(
        "verify",
        parents=[common, json_flag, encoding],
        help="check the thread rebuilds losslessly from its checkpoint and the store",
    )
    p.add_argument("thread")

    p = sub.add_parser("export", parents=[common], help="a thread's store records as JSON lines")
    p.add_argument("thread")
    p.add_argument("--out", help="file to write (default: standard output)")

    p = sub.add_parser("import", parents=[common], help="write exported records into a store")
    p.add_argument("file", help="a JSON lines file from export ('-' for standard input)")
    p.add_argument("--thread", help="import into this thread id instead of the exported one")
    p.add_argument("--ttl", type=float, help="minutes until the store may expire the records (TTL stores)")

    p = sub.add_parser("delete", parents=[common], help="delete every store record of a thread")
    p.add_argument("thread")
    p.add_argument("--yes", action="store_true", help="do not ask")
    p.add_argument(
        "--with-checkpoints",
        action="store_true",
        help="also delete the thread's checkpoints (checkpointer.delete_thread)",
    )

    p = sub.add_parser(
        "forget",
        parents=[common],
        help="remove one message's text from the thread's pages, bookmarks, sketch and search index; the agent's next step "
        "follows (privacy)",
    )
    p.add_argument("thread")
    p.add_argument("message_id", help="the id of the message to forget")
    p.add_argument("--yes", action="store_true", help="do not ask")

    p = sub.add_parser(
        "where",
        parents=[common, json_flag],
        help="list every place the thread still holds a text (store records, search index, state) and the stored "
        "message (page id, message id) that holds it: words another message quoted stay with that message",
    )
    p.add_argument("thread")
    p.add_argument("--text", required=True, help="the text to look for (a card number, a name)")

    p = sub.add_parser("report", parents=[common, encoding], help="a self-contained HTML report of a thread")
    p.add_argument("thread")
    p.add_argument("--out", required=True, help="the HTML file to write")
    return parser


# -- opening what the arguments name ------------------------------------------------------------


def _store_uri(args: argparse.Namespace) -> str:
    if not args.store:
        raise _Fail(f"no store: pass --store URI (e.g. sqlite:///pages.sqlite) or set ${STORE_ENV}")
    return str(args.store)


@contextlib.contextmanager
def _checkpointer(args: argparse.Namespace) -> Iterator[Any]:
    uri = args.checkpoints
    if uri and uri.lower() == "none":
        yield None
        return
    # Explicitly named checkpoints must exist; the store's own URI may simply hold none.
    with open_checkpointer(uri or _store_uri(args), required=bool(uri)) as saver:
        yield saver


@contextlib.contextmanager
def _store(args: argparse.Namespace, *, create: bool = False) -> Iterator[Any]:
    with open_store(_store_uri(args), create=create) as store:
        yield without_ttl_refresh(store)  # looking at a thread must not extend its records' TTL


PASSAGES_TABLE = "langmem_paging_passages"


@contextlib.contextmanager
def _passages_index(args: argparse.Namespace) -> Iterator[Any]:
    """The `PostgresSearchIndex` of a PostgreSQL store's database (its default table), when the
    agents writing there use one; else None (the store's default index is found by `default_index`)."""
    uri = _store_uri(args)
    if not uri.startswith(("postgres://", "postgresql://")):
        yield None
        return
    import psycopg

    from langmem_paging.index.postgres import PostgresSearchIndex

    with psycopg.connect(uri) as conn:
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (PASSAGES_TABLE,)).fetchone()
    if not (exists and exists[0]):
        yield None
        return
    index = PostgresSearchIndex(uri, table=PASSAGES_TABLE)
    try:
        yield index
    finally:
        index.close()


def _snapshots(args: argparse.Namespace, *, lineage: bool) -> list[Snapshot]:
    with _checkpointer(args) as saver:
        return load_snapshots(saver, args.thread, lineage=lineage) if saver is not None else []


def _branches(args: argparse.Namespace) -> Branches:
    with _checkpointer(args) as saver:
        return load_branches(saver, args.thread) if saver is not None else Branches([], [])


def _no_such_thread(args: argparse.Namespace) -> _Fail:
    return _Fail(
        f"no such thread {args.thread!r} in {shown_uri(_store_uri(args))}: it has no store records and "
        "no checkpoints (langmem-paging threads lists the store's threads)",
        1,
    )


def _is_unknown(store: Any, args: argparse.Namespace, snapshots: list[Snapshot]) -> bool:
    """No store record and no checkpoint: the thread does not exist here (a typo, another store)."""
    return not snapshots and not any(record_counts(store, args.thread).values())


def _print(out: TextIO, data: Any) -> None:
    out.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


# -- commands -----------------------------------------------------------------------------------------


def _threads(args: argparse.Namespace, out: TextIO) -> int:
    with _store(args) as store:
        rows = list_threads(store)
    if args.json:
        _print(out, [r.to_dict() for r in rows])
    elif not rows:
        out.write(f"no threads: {shown_uri(_store_uri(args))} holds no langmem-paging records\n")
    else:
        out.write(
            format_table([r.to_dict() for r in rows], ["thread_id", "pages", "clusters", "records"]) + "\n"
        )
        out.write(f"{len(rows)} thread{'' if len(rows) == 1 else 's'}, {sum(r.pages for r in rows)} pages\n")
    return 0


def _inspect(args: argparse.Namespace, out: TextIO) -> int:
    snapshots = _snapshots(args, lineage=False)
    with _store(args) as store:
        info = inspect_thread(PageStore(store), args.thread, snapshots[-1] if snapshots else None)
    if not any(info.records.values()) and info.checkpoint is None:
        raise _no_such_thread(args)
    if args.json:
        _print(out, info.to_dict())
    else:
        out.write(format_inspection(info, bookmark_width=args.width) + "\n")
    return 0


def _format_page(thread_id: str, page: Page) -> str:
    lines = [
        (
            f"page {page.id} of thread {thread_id}: {len(page.messages)} messages, {page.token_count} tokens, "
            f"formed in turn {page.created_turn} ({page.boundary}), recalled {page.access_count} times"
        ),
        f"bookmark: {page.bookmark}",
    ]
    for i, m in enumerate(page.messages, 1):
        head = [f"--- [{i}] {m.type}", f"id={m.id}"]
        if m.name:
            head.append(f"name={m.name}")
        if call_id := getattr(m, "tool_call_id", None):
            head.append(f"tool_call_id={call_id}")
        lines.append("  ".join(head))
        for call in getattr(m, "tool_calls", None) or []:
            lines.append(
                f"tool call {call.get('id')}: {call.get('name')}"
                f"({json.dumps(call.get('args', {}), ensure_ascii=False, sort_keys=True)})"
            )
        lines.append(
            m.content if isinstance(m.content, str) else json.dumps(m.content, indent=2, ensure_ascii=False)
        )
    return "\n".join(lines)


def _show(args: argparse.Namespace, out: TextIO) -> int:
    with _store(args) as store:
        page_store = PageStore(store)
        if args.page_id.startswith("c"):
            node = page_store.get_cluster(args.thread, args.page_id)
            if node is None and _is_unknown(store, args, _snapshots(args, lineage=False)):
                raise _no_such_thread(args)
            if node is None:
                raise _Fail(f"thread {args.thread!r} has no cluster {args.page_id!r}", 1)
            members = page_store.members(args.thread, node.id)
            if args.json:
                _print(out, {**node.to_dict(), "members": members})
            else:
                out.write(
                    f"cluster {node.id} of thread {args.thread}: {node.size} pages ({', '.join(members)})\n"
                    f"children: {', '.join(node.children)}\nbookmark: {node.bookmark}\n"
                )
            return 0
        page = page_store.get(args.thread, args.page_id)
        if page is None and _is_unknown(store, args, _snapshots(args, lineage=False)):
            raise _no_such_thread(args)
    if page is None:
        raise _Fail(f"thread {args.thread!r} has no page {args.page_id!r}", 1)
    if args.json:
        _print(out, dump_messages(page.messages))
    else:
        out.write(_format_page(args.thread, page) + "\n")
    return 0


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    branches = _branches(args)
    snapshots = branches.latest
    with _store(args) as store:
        if _is_unknown(store, args, snapshots):
            raise _no_such_thread(args)
        if not snapshots:  # the checkpoints may live elsewhere: not knowing is not a loss (exit 2, not 1)
            where = (
                "--checkpoints none"
                if (args.checkpoints or "").lower() == "none"
                else f"thread {args.thread!r} in {shown_uri(args.checkpoints)}"
                if args.checkpoints
                else "this store"
            )
            raise _Fail(
                f"cannot verify: no checkpoints in {where}; pass --checkpoints PATH (the checkpointer's "
                "URI, e.g. sqlite:///checkpoints.sqlite)",
                2,
            )
        result = verify_thread(
            PageStore(store),
            args.thread,
            snapshots,
            counter=TokenCounter(encoding=args.encoding),
            others=branches.others,
        )
    if args.json:
        _print(out, result.to_dict())
    else:
        out.write(format_verification(result) + "\n")
    return 0 if result.lossless else 1


def _export(args: argparse.Namespace, out: TextIO) -> int:
    with _store(args) as store:
        records = export_records(store, args.thread)
        if not records and _is_unknown(store, args, _snapshots(args, lineage=False)):
            raise _no_such_thread(args)
    if not records:
        raise _Fail(
            f"thread {args.thread!r} has no records in {shown_uri(_store_uri(args))} (only checkpoints: "
            "nothing was paged out yet)",
            1,
        )
    lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    if args.out:
        Path(args.out).write_text(lines, encoding="utf-8")
        sys.stderr.write(f"wrote {len(records)} records of thread {args.thread} to {args.out}\n")
    else:
        out.write(lines)
    return 0


def _read_records(source: str) -> list[dict[str, Any]]:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise _Fail(f"cannot read {source}: {error} (pass a JSON lines file from export)") from None
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise _Fail(f"{source}:{n}: not JSON ({error})") from error
    return records


def _import(args: argparse.Namespace, out: TextIO) -> int:
    records = _read_records(args.file)
    if not records:
        raise _Fail(f"{args.file}: no records")
    with _store(args, create=True) as store:
        try:
            with _passages_index(args) as passages:
                written = import_records(store, records, thread_id=args.thread, ttl=args.ttl, index=passages)
        except ValueError as error:
            raise _Fail(str(error), 1) from error
    out.writelines(f"imported {n} records into thread {thread}\n" for thread, n in written.items())
    return 0


def _delete(args: argparse.Namespace, out: TextIO) -> int:
    with _store(args) as store:
        counts = {k: n for k, n in record_counts(store, args.thread).items() if n}
        summary = ", ".join(f"{n} {k}" for k, n in counts.items()) or "no records"
        if not args.yes:
            if not sys.stdin.isatty():
                raise _Fail(f"thread {args.thread!r} has {summary}; pass --yes to delete them")
            answer = input(f"Delete {summary} of thread {args.thread!r}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                out.write("nothing deleted\n")
                return 1
        with _passages_index(args) as passages:  # every index's rows go: FTS5 (default_index), passages
            deleted = PageStore(store).delete_thread(args.thread, index=passages)
    out.write(f"deleted {deleted} records of thread {args.thread} ({summary})\n")
    if args.with_checkpoints:
        with _checkpointer(args) as saver:
            if saver is None:
                raise _Fail("no checkpointer to delete from: pass --checkpoints URI")
            saver.delete_thread(args.thread)
        out.write(f"deleted the checkpoints of thread {args.thread}\n")
    return 0


def _forget(args: argparse.Namespace, out: TextIO) -> int:
    if not args.yes and not sys.stdin.isatty():
        raise _Fail(
            f"forgetting message {args.message_id!r} of thread {args.thread!r} cannot be undone; pass --yes"
        )
    if not args.yes:
        answer = input(f"Forget message {args.message_id!r} of thread {args.thread!r}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            out.write("nothing forgotten\n")
            return 1
    snapshots = _snapshots(args, lineage=False)
    with _store(args) as store, _checkpointer(args) as saver, _passages_index(args) as passages:
        if _is_unknown(store, args, snapshots):
            raise _no_such_thread(args)
        pages = PageStore(store)
        # a message of a page, or one still in the context (a thread with no page yet too): refused
        # before anything is written otherwise
        resident = snapshots[-1].messages if snapshots else []
        if not any(m.id == args.message_id for m in resident) and not any(
            m.id == args.message_id for page in pages.scan(args.thread) for m in page.messages
        ):
            raise _Fail(
                f"no page of thread {args.thread!r} and no message of its latest checkpoint is "
                f"{args.message_id!r}",
                1,
            )
        # the same index as the agent's (`default_index` sees through the TTL-preserving view), and the
        # latest checkpoint, so the next prompt's bookmarks and sketch lose the text too
        changed = pages.forget(args.thread, args.message_id, index=passages, checkpointer=saver)
    state = "" if saver is not None else " (no checkpoints given: the agent's next step corrects its state)"
    where = ", ".join(changed) or "no page (still in the context)"
    out.write(f"forgot message {args.message_id} in {where} of thread {args.thread}{state}\n")
    return 0


def _where(args: argparse.Namespace, out: TextIO) -> int:
    snapshots = _snapshots(args, lineage=False)
    with _store(args) as store, _passages_index(args) as passages:
        if _is_unknown(store, args, snapshots):
            raise _no_such_thread(args)
        latest = snapshots[-1] if snapshots else None
        places = where_text(
            PageStore(store),
            args.thread,
            args.text,
            index=passages or default_index(store),
            paging=latest.paging if latest else None,
            messages=latest.messages if latest else (),
        )
    if args.json:
        _print(out, [p.to_dict() for p in places])
    elif not places:
        out.write(
            f"{args.text!r} is nowhere in thread {args.thread} (store records, search index"
            f"{', checkpointed state' if latest else ''})\n"
        )
    else:
        out.write(
            format_table([p.to_dict() for p in places], ["place", "where", "held_by", "excerpt"]) + "\n"
        )
    return 1 if places else 0


def _report(args: argparse.Namespace, out: TextIO) -> int:
    from langmem_paging.ops.report import check_report_path, render_report

    try:
        check_report_path(args.out)
    except ValueError as error:
        raise _Fail(str(error), 2) from None

    snapshots = _snapshots(args, lineage=True)
    with _store(args) as store:
        page_store = PageStore(store)
        info = inspect_thread(page_store, args.thread, snapshots[-1] if snapshots else None)
        if not any(info.records.values()) and info.checkpoint is None:
            raise _no_such_thread(args)
        pages = {p.id: p for p in page_store.list_pages(args.thread)}
        verification = (
            verify_thread(page_store, args.thread, snapshots, counter=TokenCounter(encoding=args.encoding))
            if snapshots
            else None
        )
    html = render_report(
        info,
        pages,
        verification=verification,
        context=snapshots[-1].messages if snapshots else None,
        steps=paging_steps(snapshots),
    )
    Path(args.out).write_text(html, encoding="utf-8")
    out.write(f"wrote {args.out}: {len(info.pages)} pages, {len(info.clusters)} clusters\n")
    return 0


COMMANDS = {
    "threads": _threads,
    "inspect": _inspect,
    "show": _show,
    "verify": _verify,
    "export": _export,
    "import": _import,
    "delete": _delete,
    "forget": _forget,
    "where": _where,
    "report": _report,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``langmem-paging`` with `argv` (default ``sys.argv[1:]``); returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args, sys.stdout)
    except (_Fail, BackendError) as error:
        sys.stderr.write(f"langmem-paging {args.command}: {error}\n")
        return error.code if isinstance(error, _Fail) else 2


if __name__ == "__main__":
    sys.exit(main())
