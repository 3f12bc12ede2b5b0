"""Errors: one exception type for everything the server (or the transport) refuses, and
the control-flow exceptions handlers raise."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .task import Task

__all__ = ["ConveyorError", "SkipRetry", "BatchError", "TaskFailedError", "WaitTimeoutError", "skip_retry", "is_skip_retry"]


class ConveyorError(Exception):
    """A refused call. `code` is the gRPC code name (``"INVALID_ARGUMENT"``, ``"NOT_FOUND"``,
    ``"ALREADY_EXISTS"``, ``"FAILED_PRECONDITION"``, ``"RESOURCE_EXHAUSTED"``,
    ``"UNAVAILABLE"``, ``"UNAUTHENTICATED"``, ``"PERMISSION_DENIED"``, ``"INTERNAL"``), `reason` a stable reason (the README's Errors table:
    ``"UNIQUE_KEY_CONFLICT"``, ``"INVALID_FIELD"``, ..., and ``"UNREACHABLE"`` when no answer
    came back), `field` the request field at fault when there is one, `details` the
    error's machine-readable facts (e.g. WRONG_OWNER's ``owner``)."""

    def __init__(self, code: str, reason: str, message: str, field: Optional[str] = None,
                 details: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.field = field
        self.details: dict[str, str] = dict(details or {})

    def __repr__(self) -> str:
        field = f", field={self.field!r}" if self.field else ""
        return f"ConveyorError(code={self.code!r}, reason={self.reason!r}, message={self.message!r}{field})"

    def __str__(self) -> str:
        return f"{self.code}/{self.reason}: {self.message}"


class SkipRetry(Exception):
    """Raise it (or raise ``skip_retry(err)``) from a handler to archive the task at once
    instead of retrying it."""


def skip_retry(error: BaseException | str) -> BaseException:
    """Marks `error` so the task is archived at once instead of retried (``raise skip_retry(e)``);
    a string becomes a ``SkipRetry``."""
    if isinstance(error, str):
        return SkipRetry(error)
    setattr(error, "__conveyor_skip_retry__", True)
    return error


def is_skip_retry(error: object) -> bool:
    return isinstance(error, SkipRetry) or getattr(error, "__conveyor_skip_retry__", False) is True


class BatchError(Exception):
    """Raised by a batch handler to give members their own outcome: members named in
    `errors` (by task id) fail (archived when the error is a ``SkipRetry`` or wrapped with
    ``skip_retry``, retried otherwise); members not named complete."""

    def __init__(self, errors: Mapping[str, BaseException | str], message: str = "some batch members failed") -> None:
        super().__init__(message)
        self.errors: dict[str, BaseException | str] = dict(errors)


class TaskFailedError(Exception):
    """``wait_for_result``: the task ended without completing (archived after its retries,
    or cancelled). `task` is the task as it ended; its `last_error` says why."""

    def __init__(self, task: "Task") -> None:
        how = f"was cancelled{f' ({task.cancel_reason})' if task.cancel_reason else ''}" if task.state == "cancelled" else "was archived"
        super().__init__(f"task {task.id} {how}" + (f": {task.last_error}" if task.last_error else ""))
        self.task = task


class WaitTimeoutError(Exception):
    """``wait_for_result``: the task had not finished when the wait's timeout passed."""

    def __init__(self, task_id: str, timeout: float, state: str) -> None:
        super().__init__(f"task {task_id} did not finish within {timeout:g} s (it is {state})")
        self.task_id = task_id
        self.timeout = timeout
        self.state = state
