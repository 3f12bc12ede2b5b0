"""conveyor: the Python SDK of the conveyor task-queue engine.

Producers use :class:`Client`; workers register handlers on a :class:`Worker` (or a
:class:`Mux`) and run it. See sdks/python/README.md and the repository README.
"""
from ._channel import Tls
from .client import AsyncClient, Client
from .errors import BatchError, ConveyorError, SkipRetry, TaskFailedError, WaitTimeoutError, is_skip_retry, skip_retry
from .task import Attempt, Duration, NewTask, Task, TaskInfo, encode_json

__all__ = [
    "AsyncClient", "Attempt", "BatchError", "Client", "ConveyorError", "Duration", "NewTask", "SkipRetry", "Task",
    "TaskFailedError", "TaskInfo", "Tls", "WaitTimeoutError", "encode_json", "is_skip_retry", "skip_retry",
]

from .mux import ConcurrencyRule, Context, Mux  # noqa: E402
from .worker import Worker  # noqa: E402

from .admin import Admin, AsyncAdmin  # noqa: E402

__all__ += ["Admin", "AsyncAdmin", "ConcurrencyRule", "Context", "Mux", "Worker"]
