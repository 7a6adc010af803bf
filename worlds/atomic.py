"""One way to replace a file on disk: readers and crashes see the old file or the new one, never a torn one.

It lives in `worlds`, the lowest layer, so that every package may import it: world files, bridge session
snapshots, checkpoints and exported policies are all written by `write_atomically`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile
from pathlib import Path


def write_atomically(path: str | os.PathLike[str], data: bytes | memoryview) -> Path:
    """Write `data` to `path` through a temporary file in the same folder, fsynced, then renamed over the target;
    the folder is fsynced after the rename. Raises OSError (the old file, if any, intact; no temporary file left).

    Without the fsyncs a power loss can leave an empty or truncated file under the final name, or lose the
    rename itself; the temporary file's name starts with a dot and ends in `.tmp`, so globs for the real
    files never see it."""
    target = Path(path)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)  # a replaced file keeps its permissions
    except OSError:
        mode = 0o666 & ~_umask()  # a new one gets what open() would give it, not mkstemp's owner-only 0600
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with contextlib.suppress(OSError):  # a file system without permissions (FAT) keeps its own
            os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)
    return target


@functools.cache
def _umask() -> int:
    """The process's umask (read once: os.umask can only be read by setting it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """Make a rename inside `folder` durable (a no-op where directories cannot be opened, as on Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
