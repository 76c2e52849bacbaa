"""Review and rewind of a turn's changes, with checkpoints of the notebook and the kernel (``service.py``), kept in a
store of their own (``store.py``); the policy ``review`` that lets a turn work under its checkpoint (``policy.py``)."""

from .policy import REVIEW, resolve_review
from .service import KERNEL_TOOLS, NEVER_RESTORED, NOTEBOOK_TOOLS, REVIEWED_TOOLS, Prepared, ReviewService
from .store import ReviewStore, ReviewStoreError

__all__ = [
    "KERNEL_TOOLS",
    "NEVER_RESTORED",
    "NOTEBOOK_TOOLS",
    "REVIEW",
    "REVIEWED_TOOLS",
    "Prepared",
    "ReviewService",
    "ReviewStore",
    "ReviewStoreError",
    "resolve_review",
]
