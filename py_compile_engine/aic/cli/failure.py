"""Any failure of a command as one line and exit status 1, never a traceback.

The commands turn the errors they expect into ``click.ClickException``; this module covers the
rest for every command at once (the click group and the click-free sweep path call it): an
output stream that cannot be written (``--json > /dev/full``: ``No space left on device``, a
closed pipe), a file that cannot be read or written, and any exception a command did not expect,
reported as ``<ExceptionClass>: <first line>``. ``AIC_TRACEBACK=1`` re-raises instead, for
debugging. Click-free (the sweep's fast path imports no click).
"""

from __future__ import annotations

import errno
import os
import sys

#: errno values of an output stream that cannot take more bytes.
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EFBIG, getattr(errno, "EDQUOT", -1)}


def show_tracebacks() -> bool:
    """Whether ``AIC_TRACEBACK=1`` asks for the traceback of an unexpected failure."""
    return os.environ.get("AIC_TRACEBACK") == "1"


def silence_stdout() -> None:
    """Points file descriptor 1 at ``/dev/null``: the bytes already buffered for a full or closed
    output are dropped at exit instead of failing a second time (which Python reports as
    ``Exception ignored`` and exit status 120)."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(fd, sys.stdout.fileno())
        finally:
            os.close(fd)
    except (OSError, ValueError, AttributeError):  # no real stdout (tests, embedding)
        pass
    except Exception:  # noqa: BLE001 - io.UnsupportedOperation and friends: nothing to silence
        pass


def failure_line(exc: BaseException) -> str:
    """The one-line message of a failure the command did not turn into its own error."""
    if isinstance(exc, OSError) and exc.errno in _OUTPUT_ERRNOS and exc.filename is None:
        silence_stdout()
        return f"cannot write the output: {exc.strerror or exc}"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
