"""The paging step as typed phases over one step context (see `langmem_paging.step.pipeline`)."""

from langmem_paging.step.options import Components, StepOptions, step_options
from langmem_paging.step.pipeline import paging_step
from langmem_paging.step.result import PagingResult

__all__ = ["Components", "PagingResult", "StepOptions", "paging_step", "step_options"]
