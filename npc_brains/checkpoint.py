"""Checkpoints: written atomically (temp file + os.replace), read with torch.load(weights_only=True).

A checkpoint is a plain dict of tensors, numbers, strings and lists:
    format, version, kind ("train" or "policy"), config, net (NetSpec), env (layout, action names),
    model (state dicts), and for "train": optimizer, progress, monitor, adjust, rng;
    tensors_sha256: a checksum of every tensor in the file (key path, dtype, shape and bytes), written on
    save and checked on load, so that flipped bytes in the weights are an error and never silently served.
    Files written before it have none and load with the check skipped.
"""

from __future__ import annotations

import hashlib
import io
import re
import warnings
from pathlib import Path
from typing import Any

import torch

from worlds.atomic import write_atomically

FORMAT = "village-npc-brain"
VERSION = 1
CHECKSUM_KEY = "tensors_sha256"


class CheckpointError(Exception):
    """A checkpoint that cannot be used: missing, corrupted, foreign, or made for another environment."""


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> Path:
    """Write `payload` to `path` atomically: readers see the old file or the new one, never half of one."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "version": VERSION, **payload}
    data.pop(CHECKSUM_KEY, None)
    data[CHECKSUM_KEY] = tensors_checksum(data)
    buf = io.BytesIO()
    torch.save(data, buf)
    return write_atomically(p, buf.getbuffer())


def load_checkpoint(path: str | Path, *, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"no checkpoint file at {str(p)!r}")
    try:
        with warnings.catch_warnings():  # torch's warnings about a file we then accept or refuse in one line
            warnings.simplefilter("ignore")
            data = torch.load(p, map_location=map_location, weights_only=True)
    except Exception as exc:  # corrupted zip, truncated file, foreign pickle refused by weights_only, ...
        raise CheckpointError(f"{p}: not a readable checkpoint: {_load_failure(exc)}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{p}: not a village NPC brain checkpoint (no '{FORMAT}' format tag)")
    if data.get("version") != VERSION:
        raise CheckpointError(f"{p}: checkpoint format version {data.get('version')!r}, this build reads {VERSION}")
    for key in ("config", "net", "env", "model"):
        if key not in data:
            raise CheckpointError(f"{p}: checkpoint is missing its {key!r} section")
    stored = data.get(CHECKSUM_KEY)
    if stored is not None and stored != tensors_checksum(data):
        raise CheckpointError(f"{p}: its tensors do not match the checksum stored in the file (the file is "
                              f"corrupted: restore it from a copy or retrain it)")
    return data


def _load_failure(exc: Exception) -> str:
    """Why torch.load failed, in a few words: its own messages run to paragraphs of advice (with terminal
    escapes) that would bury, or be cut in the middle of, the one line a user needs."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    if "Weights only load failed" in text:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
        if found:
            return f"it holds a Python object ({found.group(1)}) that a safe load refuses"
        return "not a torch checkpoint (its bytes are not a safe pickle of tensors)"
    if "zip archive" in text or "central directory" in text:
        return "truncated or damaged (not a whole torch zip archive)"
    first = text.splitlines()[0].strip() if text else type(exc).__name__
    first = first.split(". ", 1)[0].rstrip(".")
    if len(first) > 160:
        first = first[:first.rfind(" ", 0, 157)] + " ..."
    return f"corrupted or not a torch file: {first}"


def tensors_checksum(data: Any) -> str:
    """SHA-256 over every tensor in a checkpoint dict, in a fixed order (sorted keys), with its key path, dtype and
    shape; the stored checksum itself is left out."""
    digest = hashlib.sha256()

    def visit(node: Any, path: str) -> None:
        if isinstance(node, torch.Tensor):
            t = node.detach().cpu().contiguous()
            digest.update(f"{path}|{t.dtype}|{tuple(t.shape)}|".encode())
            digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(node, dict):
            for key in sorted(node, key=str):
                if not (path == "" and key == CHECKSUM_KEY):
                    visit(node[key], f"{path}/{key}")
        elif isinstance(node, (list, tuple)):
            for i, item in enumerate(node):
                visit(item, f"{path}[{i}]")

    visit(data, "")
    return digest.hexdigest()


def policy_payload(config: dict[str, Any], net: dict[str, Any], env: Any,
                   model: dict[str, torch.Tensor]) -> dict[str, Any]:
    """What a policy.pt holds. Its tensors are on the CPU whatever device trained them, so a policy trained on a
    GPU loads with a plain `torch.load(weights_only=True)` on a machine without one (a game's, a bundle's)."""
    return {"kind": "policy", "config": config, "net": net, "env": env_description(env),
            "model": {key: value.detach().cpu() for key, value in model.items()}}


def env_description(env: Any) -> dict[str, Any]:
    """What a policy needs to match: stored in every checkpoint."""
    return {"env_id": env.env_id, "obs_dim": int(env.obs_dim), "n_actions": int(env.n_actions),
            "state_dim": int(env.state_dim), "num_agents": int(env.num_agents),
            "observation_layout": list(env.observation_layout), "action_names": list(env.action_names)}


def check_env_compatible(stored: dict[str, Any], env: Any, source: str) -> None:
    """Raise CheckpointError naming the first thing that differs between a checkpoint and an env."""
    current = env_description(env)
    for key in ("obs_dim", "n_actions", "state_dim"):
        if stored.get(key) != current[key]:
            raise CheckpointError(f"{source}: made for {stored.get('env_id')} with {key}={stored.get(key)}, "
                                  f"but this environment ({current['env_id']}) has {key}={current[key]}")
    for key in ("observation_layout", "action_names"):
        if list(stored.get(key, [])) != current[key]:
            diff = next((i for i, (a, b) in enumerate(zip(stored.get(key, []), current[key], strict=False))
                         if a != b), None)
            where = f" (first difference at index {diff})" if diff is not None else ""
            raise CheckpointError(f"{source}: its {key} differs from this environment's{where}")


def average_policies(paths: list[str | Path], weights: list[float] | None = None) -> dict[str, Any]:
    """A policy payload whose every tensor is the weighted mean of those of the policies at `paths` (a "model soup":
    fine-tunings of one parent averaged in weight space). The first policy gives the config and env; every policy must
    share its architecture (`net`), environment and tensor shapes, else CheckpointError names the first difference.
    Write the result with `save_checkpoint`."""
    if len(paths) < 2:
        raise CheckpointError(f"averaging needs two policies or more, got {len(paths)}")
    weights = [1.0] * len(paths) if weights is None else [float(w) for w in weights]
    if len(weights) != len(paths) or any(not w > 0 for w in weights):
        raise CheckpointError(f"weights: expected one positive weight per policy, got {weights}")
    loaded = [load_checkpoint(p) for p in paths]
    first = loaded[0]
    for path, data in zip(paths, loaded, strict=True):
        if data.get("kind") != "policy":
            raise CheckpointError(f"{path}: a {data.get('kind')!r} checkpoint; average the policy.pt files of runs")
        for key in ("net", "env"):
            if data[key] != first[key]:
                raise CheckpointError(f"{path}: its {key!r} differs from {paths[0]}'s; only policies of one "
                                      f"architecture and environment can be averaged")
        if set(data["model"]) != set(first["model"]) or any(
                data["model"][k].shape != first["model"][k].shape for k in first["model"]):
            raise CheckpointError(f"{path}: its tensors differ in names or shapes from {paths[0]}'s")
    total = sum(weights)

    def mean(key: str) -> torch.Tensor:
        if not first["model"][key].is_floating_point():  # a count, not a weight: the first policy's
            return first["model"][key]
        stacked = sum(d["model"][key].double() * w for d, w in zip(loaded, weights, strict=True)) / total
        return stacked.to(first["model"][key].dtype)

    model = {key: mean(key) for key in first["model"]}
    return payload_of(first) | {"model": model, "averaged_from": [str(p) for p in paths], "averaged_weights": weights}


def payload_of(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """A loaded checkpoint without what `save_checkpoint` writes afresh (format, version, checksum): what to change
    and save again as a new file."""
    return {key: value for key, value in checkpoint.items() if key not in ("format", "version", CHECKSUM_KEY)}
