"""The stack a failed attempt carries to the node (as the TypeScript SDK's error-stack.ts):
the raised exception's traceback, then each cause in its chain (``raise ... from``, or the
exception being handled when it was raised) as its exception line and innermost frames,
cut to ATTEMPT_STACK_MAX_BYTES (the node keeps no more)."""
from __future__ import annotations

import traceback
from typing import Optional

__all__ = ["ATTEMPT_STACK_MAX_BYTES", "stack_of"]

#: The node's bound (src/base/limits.ts ATTEMPT_STACK_MAX_BYTES).
ATTEMPT_STACK_MAX_BYTES = 4 * 1024
#: Frames kept of the raised exception's traceback: the innermost, where it was raised.
_FRAMES_MAX = 30
#: Lines kept of each cause's traceback (its innermost frames).
_CAUSE_LINES = 4
#: Causes followed (a cycle ends here too).
_CAUSES_MAX = 3


def _cause(error: BaseException) -> Optional[BaseException]:
    if error.__cause__ is not None:
        return error.__cause__
    return None if error.__suppress_context__ else error.__context__


def _format(error: BaseException, limit: int) -> list[str]:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__, limit=-limit, chain=False))
    return text.rstrip("\n").split("\n")


def stack_of(error: BaseException) -> str:
    """The traceback and causes of `error`, at most ATTEMPT_STACK_MAX_BYTES of UTF-8."""
    lines = _format(error, _FRAMES_MAX)
    cause = _cause(error)
    for _ in range(_CAUSES_MAX):
        if cause is None:
            break
        formatted = _format(cause, _FRAMES_MAX)
        # Its exception line first (the last one Python prints), then its innermost frames.
        lines.append(f"Caused by: {formatted[-1]}")
        lines.extend(formatted[1:-1][-_CAUSE_LINES:])
        cause = _cause(cause)
    data = "\n".join(lines).encode()
    if len(data) <= ATTEMPT_STACK_MAX_BYTES:
        return data.decode()
    keep = ATTEMPT_STACK_MAX_BYTES - 32
    while keep > 0 and (data[keep] & 0xC0) == 0x80:  # back to a UTF-8 character start
        keep -= 1
    return data[:keep].decode() + f"…[truncated {len(data) - keep} bytes]"
