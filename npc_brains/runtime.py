"""Policy runtime: the batched `Policy` a policy file becomes (npc_brains.load_policy resolves names to files).

The CPU path is a plain numpy forward pass of the actor (a few small matmuls), which for batches of a few
dozen NPCs is several times faster than calling torch. `backend="torch"` runs the same weights in torch
(for a GPU or very large batches).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from npc_brains.policy_api import PolicyOutput

MASKED_LOGIT = np.float32(-1e9)
TEMPERATURE_RANGE = (0.01, 100.0)  # below 0.01 sampling is the most likely action but for near ties (take the
# deterministic play instead); above 100 it is as good as uniform over the valid actions
NOISE_BLOCK = 8192  # sampling noise is drawn this many values at a time (the same stream as one draw per call)


def check_temperature(value: Any, name: str = "temperature") -> float:
    """`value` as a sampling temperature; ValueError (one line, starting with `name`, the field or flag, and
    naming what is expected) otherwise."""
    low, high = TEMPERATURE_RANGE
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = float("nan")
    if not low <= t <= high:  # also refuses nan
        raise ValueError(f"{name}: expected a number from {low:g} to {high:g} (1 samples as trained, lower is "
                         f"sharper, higher more random; the most likely action is the deterministic play), "
                         f"got {value!r}")
    return t


def set_temperature(policy: Any, value: Any, name: str = "temperature") -> None:
    """Make `policy` sample from softmax(logits / T): T < 1 follows each NPC's preferences more closely, T > 1
    less; the most likely action, and so deterministic play, does not change. ValueError for a bad T or a
    policy without learned probabilities (the scripted rules, random actions)."""
    t = check_temperature(value, name)
    if not hasattr(policy, "temperature"):
        who = getattr(policy, "name", type(policy).__name__)
        raise ValueError(f"{name}: {who} has no learned probabilities to sharpen (expected a trained policy)")
    policy.temperature = t


def tempered_probs(probs: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(log(probs) / T) row by row, computed in logs so that a small T does not underflow; an action of
    probability 0 (masked) stays at 0."""
    if temperature == 1.0:
        return probs
    with np.errstate(divide="ignore"):
        z = np.log(probs) / np.float32(temperature)
    z -= z.max(1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(1, keepdims=True)
    return z.astype(np.float32, copy=False)


def _np(t: Any) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().numpy().astype(np.float32))


class _PolicyBase:
    name: str
    temperature: float = 1.0  # sampling temperature (set_temperature); 1 samples as trained

    def __init__(self, ckpt: dict[str, Any], name: str):
        from npc_brains.networks import NetSpec

        self.spec = NetSpec.from_dict(ckpt["net"])
        self.env = dict(ckpt["env"])
        self.config = dict(ckpt["config"])
        self.name = name
        self.obs_dim = self.spec.obs_dim
        self.n_actions = self.spec.n_actions
        self.action_names: list[str] = list(self.env["action_names"])
        self.observation_layout: list[str] = list(self.env["observation_layout"])
        self.env_id: str = str(self.env["env_id"])
        model = ckpt["model"]
        if "value_norm.running_mean" in model:
            d = max(float(model["value_norm.debias"]), 1e-5)
            mean = float(model["value_norm.running_mean"]) / d
            var = max(float(model["value_norm.running_mean_sq"]) / d - mean * mean, 1e-7)
            self._v_mean, self._v_std = mean, max(var ** 0.5, 1e-3)
        else:
            self._v_mean, self._v_std = 0.0, 1.0

    def _check(self, obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        obs = np.asarray(obs, np.float32)
        mask = np.asarray(mask, bool)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"obs: expected shape (R, {self.obs_dim}), got {obs.shape}")
        if mask.shape != (obs.shape[0], self.n_actions):
            raise ValueError(f"mask: expected shape ({obs.shape[0]}, {self.n_actions}), got {mask.shape}")
        return obs, mask

    def check_env(self, env: Any) -> None:
        """Raise CheckpointError if this policy was made for a different observation/action layout."""
        from npc_brains.checkpoint import check_env_compatible

        check_env_compatible(self.env, env, self.name)


class NumpyPolicy(_PolicyBase):
    """The actor's forward pass in numpy: encoder (2 tanh layers) -> FiLM -> masked head."""

    def __init__(self, ckpt: dict[str, Any], name: str, seed: int | None = None):
        super().__init__(ckpt, name)
        m = ckpt["model"]
        self._w1, self._b1 = _np(m["actor.encoder.l1.weight"]).T.copy(), _np(m["actor.encoder.l1.bias"])
        self._w2, self._b2 = _np(m["actor.encoder.l2.weight"]).T.copy(), _np(m["actor.encoder.l2.bias"])
        self._wh, self._bh = _np(m["actor.head.weight"]).T.copy(), _np(m["actor.head.bias"])
        self._wv, self._bv = _np(m["actor.runtime_value.weight"]).T.copy(), _np(m["actor.runtime_value.bias"])
        cond = np.asarray(self.spec.cond_index, np.int64)
        contiguous = cond.size > 0 and np.array_equal(cond, np.arange(cond[0], cond[0] + cond.size))
        # a slice is a view (no copy); the village's traits and role are contiguous columns
        self._cond: slice | np.ndarray = slice(int(cond[0]), int(cond[-1]) + 1) if contiguous else cond
        # For a handful of NPCs the forward's time is mostly the fixed cost of its numpy calls, so it makes
        # few: the head and the slot head's self part share one product, the slot head writes its logits in
        # place, FiLM's "1 +" is folded into its bias, and sampling uses one Gumbel draw per logit. (From
        # about 16 NPCs up the arithmetic of the default network dominates: bench/policy_latency.py.)
        self._slot = None
        self._whs, self._bhs = self._wh, self._bh
        if self.spec.slot_layout:
            offset, feats, slots, untargeted, kinds = self.spec.slot_layout
            ws, bs = _np(m["actor.slot_head.from_self.weight"]).T, _np(m["actor.slot_head.from_self.bias"])
            self._whs = np.ascontiguousarray(np.concatenate([self._wh, ws], 1))
            self._bhs = np.concatenate([self._bh, bs])
            self._slot = (slice(offset, offset + slots * feats), feats, slots, untargeted, kinds,
                          _np(m["actor.slot_head.from_slot.weight"]).T.copy(), _np(m["actor.slot_head.from_slot.bias"]),
                          _np(m["actor.slot_head.out.weight"]).T.copy(), _np(m["actor.slot_head.out.bias"])[:, None])
        if "actor.film.lin.weight" in m:
            self._wf, self._bf = _np(m["actor.film.lin.weight"]).T.copy(), _np(m["actor.film.lin.bias"])
            self._bf[: self._w2.shape[1]] += 1.0  # h * (1 + gamma) + beta, with the 1 in gamma's bias
        else:
            self._wf = None
        self.rng = np.random.default_rng(seed)

    @property
    def rng(self) -> np.random.Generator:
        """The sampling RNG; assigning a new one (to re-seed) drops the noise drawn ahead from the old one."""
        return self._rng

    @rng.setter
    def rng(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._log_e = np.empty(0, np.float32)  # log of Exp(1) draws not used yet
        self._log_e_at = 0

    def _log_exponentials(self, n: int) -> np.ndarray:
        """The next n values of log(E), E ~ Exp(1) from self.rng, in the order single draws would give: they
        are drawn a block at a time, because one draw per call costs more than the rest of a small forward."""
        at = self._log_e_at
        if at + n > len(self._log_e):
            fresh = self._rng.standard_exponential(max(NOISE_BLOCK, n), dtype=np.float32)
            with np.errstate(divide="ignore"):  # a draw of exactly 0 gives -inf: an infinite Gumbel
                np.log(fresh, out=fresh)
            self._log_e = np.concatenate([self._log_e[at:], fresh])
            at = 0
        self._log_e_at = at + n
        return self._log_e[at:at + n]

    def _features(self, obs: np.ndarray) -> np.ndarray:
        h = obs @ self._w1
        h += self._b1
        np.tanh(h, out=h)
        h = h @ self._w2
        h += self._b2
        np.tanh(h, out=h)
        if self._wf is not None:
            gb = obs[:, self._cond] @ self._wf
            gb += self._bf
            hidden = h.shape[1]
            h *= gb[:, :hidden]
            h += gb[:, hidden:]
        return h

    def _raw_logits(self, obs: np.ndarray, h: np.ndarray) -> np.ndarray:
        """(R, A) unmasked logits (a view into a wider array when there is a slot head)."""
        hb = h @ self._whs
        hb += self._bhs
        if self._slot is None:
            return hb
        A = self.n_actions
        raw = hb[:, :A]
        cols, feats, slots, u, kinds, wk, bk, wo, bo = self._slot
        z = obs[:, cols].reshape(len(obs), slots, feats) @ wk  # (R, slots, H): each slot's entity
        z += bk
        z += hb[:, None, A:]  # and the NPC itself
        np.tanh(z, out=z)
        targeted = raw[:, u:].reshape(len(obs), kinds, slots)  # a view: logits are kind-major
        # one (R x slots, H) @ (H, kinds) product: numpy multiplies an (R, slots, H) stack as R small matrices
        targeted += (z.reshape(-1, z.shape[2]) @ wo).reshape(len(obs), slots, kinds).transpose(0, 2, 1)
        targeted += bo
        return raw

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False, with_probs: bool = False,
            with_values: bool = False) -> PolicyOutput:
        obs, mask = self._check(obs, mask)
        h = self._features(obs)
        raw = self._raw_logits(obs, h)
        if self.temperature != 1.0:
            raw = raw / np.float32(self.temperature)  # a copy: raw may be a view into the slot head's buffer
        logits = np.where(mask, raw, MASKED_LOGIT) if (deterministic or with_probs) else None
        if logits is not None and deterministic:
            actions = logits.argmax(1)
        else:
            # Gumbel-max: argmax(raw + G) with G = -log(E), E ~ Exp(1); masked actions get -inf after the noise
            # (so even an infinite draw cannot pick one)
            noise = raw - self._log_exponentials(raw.size).reshape(raw.shape)
            actions = np.where(mask, noise, -np.inf).argmax(1)
        out = PolicyOutput(actions.astype(np.int64))
        if with_probs:
            z = np.exp(logits - logits.max(1, keepdims=True))
            out.probs = (z / z.sum(1, keepdims=True)).astype(np.float32)
        if with_values:
            v = (h @ self._wv + self._bv)[:, 0]
            out.values = (v * self._v_std + self._v_mean).astype(np.float32)
        return out


class TorchPolicy(_PolicyBase):
    """The same actor in torch, on any device."""

    def __init__(self, ckpt: dict[str, Any], name: str, seed: int | None = None, device: str = "cpu"):
        super().__init__(ckpt, name)
        import torch

        from npc_brains.networks import Actor

        self.torch = torch
        self.device = torch.device(device)
        self.actor = Actor(self.spec).to(self.device)
        state = {k[len("actor."):]: v for k, v in ckpt["model"].items() if k.startswith("actor.")}
        self.actor.load_state_dict(state)
        self.actor.eval()
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(0 if seed is None else seed)

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False, with_probs: bool = False,
            with_values: bool = False) -> PolicyOutput:
        obs, mask = self._check(obs, mask)
        torch = self.torch
        with torch.inference_mode():
            o = torch.from_numpy(obs).to(self.device)
            m = torch.from_numpy(mask).to(self.device)
            logits, _, adapted = self.actor.logits_and_features(o, m)
            if self.temperature != 1.0:
                logits = logits / self.temperature
            probs = torch.softmax(logits, -1)
            if deterministic:
                actions = logits.argmax(-1)
            else:
                actions = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)
            out = PolicyOutput(actions.cpu().numpy().astype(np.int64))
            if with_probs:
                out.probs = probs.cpu().numpy().astype(np.float32)
            if with_values:
                v = self.actor.runtime_value(adapted).squeeze(-1) * self._v_std + self._v_mean
                out.values = v.cpu().numpy().astype(np.float32)
        return out


def load_policy_file(path: str | Path, *, name: str | None = None, seed: int | None = None,
                     backend: str = "numpy", device: str = "cpu") -> NumpyPolicy | TorchPolicy:
    """The policy in a training checkpoint or an exported policy file, named `name` (default: the file's stem).

    Raises CheckpointError (one line) for a missing, corrupted or foreign file. Names such as "default" and the
    checks that a policy fits the village are npc_brains.load_policy's.
    """
    from npc_brains.checkpoint import load_checkpoint

    if backend not in ("numpy", "torch"):
        raise ValueError(f"backend: expected 'numpy' or 'torch', got {backend!r}")
    ckpt = load_checkpoint(path)
    name = name or Path(path).stem
    if backend == "numpy":
        return NumpyPolicy(ckpt, name, seed)
    return TorchPolicy(ckpt, name, seed, device)
