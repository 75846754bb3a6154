"""tools/check_complexity.py, CI's radon gate: a function above the limit is named, one at it is not."""

from __future__ import annotations

from pathlib import Path

from tools.check_complexity import LIMIT, too_complex


def _function(name: str, branches: int) -> str:
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(branches))
    return f"def {name}(x):\n{body}    return -1\n"


def test_only_functions_above_the_limit_are_named(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        _function("at_the_limit", LIMIT - 1)  # each `if` adds one to the function's 1
        + _function("above", LIMIT)
        + "class C:\n"
        + "\n".join("    " + line for line in _function("method", LIMIT).splitlines())
        + "\n"
    )
    found = too_complex([str(tmp_path)])
    assert [line.split(" ", 1)[1] for line in found] == [f"above ({LIMIT + 1})", f"C.method ({LIMIT + 1})"]
    assert all(line.startswith(f"{source}:") for line in found)
