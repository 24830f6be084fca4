"""Bounded reads of untrusted files (specs, case files, reference files).

:func:`read_bounded` never reads more than ``limit + 1`` bytes, whatever the path
names: the file is opened with ``O_NOFOLLOW`` (the last component may not be a
symbolic link), the opened descriptor is checked to be a regular file (not a FIFO,
device such as ``/dev/zero``, or directory) and its size is checked before reading.
Every problem is a :class:`~losscc.errors.SpecError` naming the path, code E100
(unreadable) or E104 (over the limit).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .errors import Diagnostic, Location, SpecError

_CHUNK = 1 << 16


def read_bounded(path: str | Path, limit: int, what: str = "file", shown: str | None = None,
                 code: str = "E100", follow_links: bool = False, limit_name: str = "file_bytes") -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them, else SpecError.

    `what` names the file in messages ("spec", "case file"); `shown` is the path as the
    user should see it (default: `path`); `code` is the error code of unreadable files;
    `limit_name` is the limit's name in :mod:`losscc.limits` for the message;
    `follow_links` allows the last component to be a symbolic link (the caller has
    checked where it points)."""
    shown = shown or str(path)
    loc = Location(shown)

    def fail(c: str, message: str):
        return SpecError([Diagnostic(loc, c, message)])

    def too_big(size: str):
        return SpecError([Diagnostic(Location(shown, 1, 1), "E104",
                                     f"file exceeds the limit '{limit_name}' ({limit}){size}")])

    flags = os.O_RDONLY | (0 if follow_links else getattr(os, "O_NOFOLLOW", 0)) | getattr(os, "O_NONBLOCK", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise fail(code, f"cannot read {what}: it is a symbolic link") from None
        raise fail(code, f"cannot read {what}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise fail(code, f"cannot read {what}: {kind}")
        if st.st_size > limit:
            raise too_big(f" ({st.st_size} bytes)")
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:  # the file grew while it was read
            raise too_big("")
        return b"".join(chunks)
    except OSError as exc:
        raise fail(code, f"cannot read {what}: {exc.strerror}") from None
    finally:
        os.close(fd)
