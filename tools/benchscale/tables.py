"""Markdown building blocks of the report: a number in ms, a section with its table."""

from __future__ import annotations


def ms(value: float | None) -> str:
    return "-" if value is None else (f"{value:.2f}" if value < 100 else f"{value:.0f}")


def section_table(title: str, columns: list[str], rows: list[list[str]]) -> list[str]:
    """Lines of a Markdown section: a heading and a table."""
    return [
        "",
        f"### {title}",
        "",
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join(["---"] * len(columns)) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
