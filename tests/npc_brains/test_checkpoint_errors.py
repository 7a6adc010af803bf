"""A checkpoint torch cannot load is one short line: no paragraph of torch's advice, no escapes, no warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from npc_brains.checkpoint import CheckpointError, load_checkpoint


def _files(tmp_path):
    good = tmp_path / "good.pt"
    torch.save({"format": "village-npc-brain", "x": torch.zeros(3)}, good)
    (tmp_path / "junk.pt").write_bytes(bytes(range(256)) * 20)
    (tmp_path / "truncated.pt").write_bytes(good.read_bytes()[:300])
    torch.save({"format": "village-npc-brain", "obj": np.zeros(3)}, tmp_path / "numpy.pt")
    return {"junk.pt": "not a torch checkpoint", "truncated.pt": "truncated or damaged",
            "numpy.pt": "a Python object (numpy."}


def test_unloadable_files_are_one_short_line(tmp_path):
    for name, needle in _files(tmp_path).items():
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(tmp_path / name)
        text = str(info.value)
        assert "\n" not in text and "\x1b" not in text and len(text) < 300, text
        assert needle in text and "weights_only" not in text and "file an issue" not in text, text


def test_torch_warnings_while_loading_do_not_reach_the_user(tmp_path, monkeypatch):
    real = torch.load

    def noisy(*args, **kwargs):
        warnings.warn("TypedStorage is deprecated", UserWarning, stacklevel=1)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "load", noisy)
    (tmp_path / "junk.pt").write_bytes(b"\x80\x02junk")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(CheckpointError):
            load_checkpoint(tmp_path / "junk.pt")
    assert not caught
