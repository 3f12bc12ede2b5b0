"""Routes tasks to handlers by type: plain and batch handlers, their concurrency rules, and
the context a handler gets."""
from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional, TypeVar, Union



__all__ = ["ConcurrencyRule", "Context", "Handler", "BatchHandler", "Mux", "STRATEGIES"]

#: LimitStrategy names (task.proto lists them).
STRATEGIES = ("GROUP_ROUND_ROBIN", "CANCEL_IN_PROGRESS", "CANCEL_NEWEST", "CANCEL_QUEUED_EXCEPT_NEWEST",
              "CANCEL_QUEUED_EXCEPT_OLDEST")


@dataclass(frozen=True)
class ConcurrencyRule:
    """A concurrency rule of a task type, registered when the worker starts. `expression` is a
    CEL expression over ``input`` (the JSON payload) and ``additional_metadata`` (the
    metadata), e.g. ``"input.user_id"``; `max_runs` is the limit per key, a number or a CEL
    expression such as ``"input.tier == 'premium' ? 10 : 1"``; `strategy` one of
    :data:`STRATEGIES`; rules with the same `name` share one budget across task types."""

    expression: str
    max_runs: Union[int, str]
    strategy: str = "GROUP_ROUND_ROBIN"
    name: str = ""


class Context:
    """What a handler gets besides its task.

    `cancelled` is set when the attempt must stop: the task was cancelled (by an operator,
    or by a CANCEL_IN_PROGRESS rule), its lease was lost, its deadline passed, or the worker
    is stopping; `cancel_reason` then says why. An ``async`` handler is also cancelled
    (``asyncio.CancelledError`` at its next ``await``); a plain function runs in a thread
    and should check ``ctx.cancelled.is_set()`` (or wait on it) in long loops. Once
    cancelled, whatever the handler returns is ignored and its worker slot is already free.
    """

    def __init__(self, lease_id: str, deadline: Optional[datetime]) -> None:
        self.lease_id = lease_id
        #: The attempt's effective deadline (earlier of lease time + timeout and the task's
        #: deadline) on this machine's clock, or None.
        self.deadline = deadline
        self.cancelled = threading.Event()
        self.cancel_reason = ""

    def _cancel(self, reason: str) -> None:
        if not self.cancelled.is_set():
            self.cancel_reason = reason
            self.cancelled.set()


#: A task handler: ``fn(task)`` or ``fn(task, ctx)``, ``async def`` or a plain function.
#: Return bytes to store them as the result, a str for its UTF-8, None for no result,
#: anything else for its JSON. Raise to retry with backoff; raise SkipRetry (or
#: ``skip_retry(err)``) to archive at once.
Handler = Callable[..., Union[Any, Awaitable[Any]]]
#: A batch handler: ``fn(tasks)`` or ``fn(tasks, ctx)`` with every member of a fired group.
#: Return to complete all; raise to retry all (SkipRetry: archive all); raise BatchError to
#: give named members their own outcome (the rest complete).
BatchHandler = Callable[..., Union[Any, Awaitable[Any]]]
F = TypeVar("F", bound=Callable[..., Any])


def wants_context(fn: Callable[..., Any]) -> bool:
    """True when `fn` takes a second positional argument (the Context)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


class Mux:
    """Task type → handler. Register with decorators (``@mux.task("email:send")``,
    ``@mux.batch_task("digest")``) or with :meth:`handle` / :meth:`handle_batch`."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._batch_handlers: dict[str, BatchHandler] = {}
        self._rules: dict[str, list[ConcurrencyRule]] = {}

    def handle(self, type: str, handler: Handler, *, concurrency: Sequence[ConcurrencyRule] = ()) -> "Mux":
        """Registers the handler of a task type and its concurrency rules (in chain order)."""
        if not type:
            raise ValueError("Mux.handle: type must not be empty")
        if type in self._handlers:
            raise ValueError(f"Mux.handle: a handler for {type!r} is already registered")
        for rule in concurrency:
            if rule.strategy not in STRATEGIES:
                raise ValueError(f"Mux.handle: unknown strategy {rule.strategy!r}; one of {', '.join(STRATEGIES)}")
        self._handlers[type] = handler
        if concurrency:
            self._rules[type] = list(concurrency)
        return self

    def handle_batch(self, type: str, handler: BatchHandler) -> "Mux":
        """Registers the batch handler of a task type: the worker then receives that type's
        group batches; it also serves single tasks of the type that have no plain handler."""
        if not type:
            raise ValueError("Mux.handle_batch: type must not be empty")
        if type in self._batch_handlers:
            raise ValueError(f"Mux.handle_batch: a batch handler for {type!r} is already registered")
        self._batch_handlers[type] = handler
        return self

    def task(self, type: str, *, concurrency: Sequence[ConcurrencyRule] = ()) -> Callable[[F], F]:
        """Decorator form of :meth:`handle`."""

        def register(fn: F) -> F:
            self.handle(type, fn, concurrency=concurrency)
            return fn

        return register

    def batch_task(self, type: str) -> Callable[[F], F]:
        """Decorator form of :meth:`handle_batch`."""

        def register(fn: F) -> F:
            self.handle_batch(type, fn)
            return fn

        return register

    def handler_for(self, type: str) -> Optional[Handler]:
        return self._handlers.get(type)

    def batch_handler_for(self, type: str) -> Optional[BatchHandler]:
        return self._batch_handlers.get(type)

    def rules_for(self, type: str) -> list[ConcurrencyRule]:
        return list(self._rules.get(type, ()))

    @property
    def types(self) -> list[str]:
        """Every handled type (plain or batch), in registration order."""
        return list(dict.fromkeys([*self._handlers, *self._batch_handlers]))

    @property
    def batch_types(self) -> list[str]:
        """Types with a batch handler (advertised to the node in every Lease call)."""
        return list(self._batch_handlers)


def encode_result(value: Any) -> bytes:
    """A handler's return value as result bytes."""
    from .task import encode_json

    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return encode_json(value)


