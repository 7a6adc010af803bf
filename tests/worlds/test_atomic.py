"""worlds.atomic.write_atomically: the old file or the new one, never a torn one, and no temporary file left."""

from __future__ import annotations

import os

import pytest

from worlds import atomic


def test_writes_the_bytes_and_leaves_only_the_target(tmp_path):
    target = tmp_path / "village.toml"
    target.write_bytes(b"old")
    assert atomic.write_atomically(target, memoryview(b"new contents")) == target
    assert target.read_bytes() == b"new contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["village.toml"]


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary_one(tmp_path, monkeypatch, failing):
    target = tmp_path / "session.npz"
    target.write_bytes(b"old snapshot")

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, failing, fail)
    with pytest.raises(OSError, match="No space left"):
        atomic.write_atomically(target, b"new snapshot")
    monkeypatch.undo()
    assert target.read_bytes() == b"old snapshot"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.npz"]


def test_an_interrupted_write_removes_the_temporary_file(tmp_path, monkeypatch):
    """Not only OSError: a KeyboardInterrupt mid-write must not leave a stray temporary file either."""
    target = tmp_path / "policy.pt"

    def interrupt(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_atomically(target, b"weights")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_file_is_fsynced_before_the_rename_and_the_folder_after_it(tmp_path, monkeypatch):
    calls: list[str] = []
    real_fsync, real_replace, real_open = os.fsync, os.replace, os.open
    opened_dirs: set[int] = set()

    def open_(path, flags, *args):
        fd = real_open(path, flags, *args)
        if os.path.isdir(path):
            opened_dirs.add(fd)
        return fd

    monkeypatch.setattr(atomic.os, "open", open_)

    def fsync(fd: int) -> None:
        calls.append("fsync dir" if fd in opened_dirs else "fsync file")
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b))[1])
    atomic.write_atomically(tmp_path / "world.toml", b"x")
    assert calls == ["fsync file", "replace", "fsync dir"]


def test_a_missing_folder_is_an_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic.write_atomically(tmp_path / "no" / "such" / "folder.toml", b"x")


def test_a_new_file_gets_the_umask_mode_and_a_replaced_one_keeps_its_own(tmp_path):
    import stat

    mask = os.umask(0o022)
    os.umask(mask)
    fresh = atomic.write_atomically(tmp_path / "world.toml", b"a")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~mask  # as open() would make it, not mkstemp's 0600
    kept = tmp_path / "private.pt"
    kept.write_bytes(b"old")
    kept.chmod(0o640)
    atomic.write_atomically(kept, b"new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_bytes() == b"new"
