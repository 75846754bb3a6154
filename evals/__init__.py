"""Evaluation harness for langmem-paging: `python -m evals --help`."""
