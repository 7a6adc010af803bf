"""Export a trained policy's actor to ONNX, and run an exported actor with onnxruntime.

`export_onnx` writes the actor as a graph with inputs `obs` (float32 [batch, obs_dim]) and `mask` (bool
[batch, n_actions]) and outputs `probs` (float32 [batch, n_actions], masked softmax) and `action` (int64
[batch], the most likely valid action); the batch axis is dynamic. The default opset, 15, is one Unity
Sentis and Unreal NNE read. The observation layout, the action names, the protocol version and the
network's sizes travel in the model's metadata (`metadata_props`), so an engine can check what it feeds.
The actor of npc_brains/networks.py is written node by node (`_actor_graph`: 22 nodes where torch's
tracer writes some 95); another actor class is traced by torch.

`OnnxPolicy` runs such a file (or a policy exported in memory) in onnxruntime with one intra-op thread
and no spinning, for `village serve --backend onnx`. onnx, onnxscript and onnxruntime are the `[onnx]`
extra and are imported only here, only when asked for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from npc_brains.personality import NEUTRAL_TRAIT, TRAIT_COLUMNS, check_personality, check_traits, trait_columns
from npc_brains.policy_api import PolicyOutput
from npc_brains.runtime import tempered_probs
from worlds.atomic import write_atomically

DEFAULT_OPSET = 15
MIN_OPSET, MAX_OPSET = 13, 20
BRIDGE_PROTOCOL_VERSION = 1  # bridge/protocol.py's PROTOCOL_VERSION (npc_brains may not import the bridge)


class ExportError(Exception):
    """The policy cannot be exported or an exported file cannot be run (a one-line reason)."""


def _need(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ExportError(f"{module} is not installed: pip install 'village-npc[onnx]'") from None


def _torch_policy(policy: Any) -> Any:
    """A TorchPolicy of the same weights: the loaded one, or rebuilt from a policy spec or a NumpyPolicy."""
    from npc_brains.resolve import PolicyError, load_policy
    from npc_brains.runtime import TorchPolicy

    if isinstance(policy, (str, Path)):
        try:
            policy = load_policy(policy, backend="torch")
        except (PolicyError, OSError) as exc:
            raise ExportError(f"cannot load policy {str(policy)!r}: {exc}") from None
    if isinstance(policy, TorchPolicy):
        return policy
    raise ExportError(f"policy {getattr(policy, 'name', type(policy).__name__)!r} is not a trained network "
                      "(scripted and random baselines have no actor to export); give a checkpoint or 'default'")


class _Exported:
    """The module traced into the graph by torch's exporter: (obs, mask) -> (probs, action). Used for an actor
    that `_actor_graph` does not know."""

    @staticmethod
    def build(actor: Any, personality: tuple[float, np.ndarray] | None = None) -> Any:
        import torch

        class ActorGraph(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.actor = actor

            def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                logits = self.actor(obs, mask)
                if personality is not None:  # npc_brains.personality, baked in
                    strength, keep = personality
                    keep_t = torch.from_numpy(keep)
                    ref = self.actor(obs * keep_t + (1 - keep_t) * NEUTRAL_TRAIT, mask)
                    logits = ref + strength * (logits - ref)
                return torch.softmax(logits, -1), logits.argmax(-1)

        return ActorGraph().eval()


class _GraphBuilder:
    """Nodes and initialisers of a graph in the making (onnx.helper's lists, with fresh names)."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        from onnx import numpy_helper

        self._n += 1
        name = f"c{self._n}"
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(np.asarray(value, dtype)), name))
        return name

    def op(self, op_type: str, inputs: list[str], output: str | None = None, **attrs: Any) -> str:
        from onnx import helper

        self._n += 1
        out = output or f"t{self._n}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out


def _actor_graph(actor: Any, opset: int, personality: tuple[float, np.ndarray] | None = None) -> Any:
    """The actor of npc_brains/networks.py written as a graph by hand, or None for another actor class.

    Torch's tracer writes each tensor operation of the Python forward as it comes (some 40 nodes after
    onnxruntime's own fusions: shape arithmetic, the slot head's views, slices of FiLM's output); at 16 rows
    the cost of a node is its dispatch, not its arithmetic, so the same function is written here with fewer:
    FiLM's shift goes into the Gemm that follows as its C input and its bias into the biases downstream, the
    slot head's output layer is one Gemm over the (rows, slots x hidden) activations whose weights put each
    (kind, slot) logit in its kind-major column and that adds the untargeted head as C. Same arithmetic up to
    float32 rounding (the parity test: probabilities within 1e-5, the same greedy actions)."""
    from onnx import TensorProto, helper

    from npc_brains.networks import Actor

    if type(actor) is not Actor:
        return None
    spec = actor.spec

    def w(t: Any) -> np.ndarray:
        return t.detach().cpu().numpy().astype(np.float32)

    g = _GraphBuilder()
    x = "obs"
    if personality is not None:  # npc_brains.personality: each row and its neutral villager in one batch
        keep = personality[1]
        neutral = g.op("Add", [g.op("Mul", ["obs", g.const(keep[None])]), g.const((1 - keep[None]) * NEUTRAL_TRAIT)])
        x = g.op("Concat", ["obs", neutral], axis=0)
    enc = actor.encoder
    h = g.op("Tanh", [g.op("Gemm", [x, g.const(w(enc.l1.weight)), g.const(w(enc.l1.bias))], transB=1)])
    h = g.op("Tanh", [g.op("Gemm", [h, g.const(w(enc.l2.weight)), g.const(w(enc.l2.bias))], transB=1)])
    hidden = spec.hidden
    shift_bias = np.zeros(hidden, np.float32)  # what `adapted` lacks: added by every consumer's bias instead
    if actor.film is not None:
        idx = [int(i) for i in spec.cond_index]
        if idx == list(range(idx[0], idx[0] + len(idx))):
            cond = g.op("Slice", [x, g.const([idx[0]], np.int64), g.const([idx[-1] + 1], np.int64),
                                  g.const([1], np.int64)])
        else:
            cond = g.op("Gather", [x, g.const(idx, np.int64)], axis=1)
        fw, fb = w(actor.film.lin.weight), w(actor.film.lin.bias)
        scaled = g.op("Mul", [h, g.op("Gemm", [cond, g.const(fw[:hidden]), g.const(fb[:hidden] + 1)], transB=1)])
        adapted = g.op("Gemm", [cond, g.const(fw[hidden:]), scaled], transB=1)  # h * (1 + gamma) + beta - b
        shift_bias = fb[hidden:]
    else:
        adapted = h
    head_w, head_b = w(actor.head.weight), w(actor.head.bias) + w(actor.head.weight) @ shift_bias
    sh = actor.slot_head
    if sh is None:
        logits = g.op("Gemm", [adapted, g.const(head_w), g.const(head_b)], transB=1)
    else:
        offset, feats, slots, untargeted, kinds = sh.offset, sh.features, sh.slots, sh.untargeted, sh.kinds
        self_w = w(sh.from_self.weight)
        slot_hidden = self_w.shape[0]
        per_self = g.op("Gemm", [adapted, g.const(self_w), g.const(w(sh.from_self.bias) + self_w @ shift_bias
                                                                   + w(sh.from_slot.bias))], transB=1)
        cols = g.op("Slice", [x, g.const([offset], np.int64), g.const([offset + slots * feats], np.int64),
                              g.const([1], np.int64)])
        per_slot = g.op("Gemm", [g.op("Reshape", [cols, g.const([-1, feats], np.int64)]),
                                 g.const(w(sh.from_slot.weight))], transB=1)  # (rows x slots, slot_hidden)
        z = g.op("Add", [g.op("Reshape", [per_slot, g.const([-1, slots, slot_hidden], np.int64)]),
                         g.op("Unsqueeze", [per_self, g.const([1], np.int64)])])
        z = g.op("Reshape", [g.op("Tanh", [z]), g.const([-1, slots * slot_hidden], np.int64)])
        out_w, out_b = w(sh.out.weight), w(sh.out.bias)  # (kinds, slot_hidden), (kinds,)
        block = np.zeros((slots * slot_hidden, spec.n_actions), np.float32)
        for k in range(slots):
            for j in range(kinds):
                col = untargeted + j * slots + k  # the flat action layout is kind-major
                block[k * slot_hidden:(k + 1) * slot_hidden, col] = out_w[j]
                head_b[col] += out_b[j]
        untargeted_logits = g.op("Gemm", [adapted, g.const(head_w), g.const(head_b)], transB=1)
        logits = g.op("Gemm", [z, g.const(block), untargeted_logits])
    from npc_brains.runtime import MASKED_LOGIT

    if personality is not None:  # own and neutral halves: neutral + S * (own - neutral)
        from onnx import helper as onnx_helper

        own, ref = "logits_own", "logits_neutral"
        attrs = {"num_outputs": 2} if opset >= 18 else {}
        g.nodes.append(onnx_helper.make_node("Split", [logits], [own, ref], axis=0, **attrs))
        logits = g.op("Add", [ref, g.op("Mul", [g.op("Sub", [own, ref]), g.const(personality[0])])])
    masked = g.op("Where", ["mask", logits, g.const(MASKED_LOGIT)])
    g.op("Softmax", [masked], "probs", axis=-1)
    g.op("ArgMax", [masked], "action", axis=-1, keepdims=0)
    graph = helper.make_graph(
        g.nodes, "village_actor",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", spec.obs_dim]),
         helper.make_tensor_value_info("mask", TensorProto.BOOL, ["batch", spec.n_actions])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", spec.n_actions]),
         helper.make_tensor_value_info("action", TensorProto.INT64, ["batch"])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # what onnxruntime 1.14+ and Unity Sentis read
    return model


def metadata(policy: Any, opset: int, strength: float = 1.0, traits: Sequence[str] = TRAIT_COLUMNS) -> dict[str, str]:
    spec = policy.spec
    return {
        "village.personality_strength": repr(float(strength)), "village.personality_traits": json.dumps(list(traits)),
        "village.format": "village-npc-actor/1", "village.policy": str(policy.name),
        "village.env_id": str(policy.env_id), "village.protocol_version": str(BRIDGE_PROTOCOL_VERSION),
        "village.obs_dim": str(spec.obs_dim), "village.n_actions": str(spec.n_actions),
        "village.observation_layout": json.dumps(list(policy.observation_layout)),
        "village.action_names": json.dumps(list(policy.action_names)),
        "village.tuning": json.dumps((policy.config or {}).get("tuning") or {}),
        "village.opset": str(opset), "village.inputs": "obs float32 [batch, obs_dim]; mask bool [batch, n_actions]",
        "village.outputs": "probs float32 [batch, n_actions]; action int64 [batch]",
    }


def export_bytes(policy: Any, opset: int = DEFAULT_OPSET, *, personality_strength: float = 1.0,
                 personality_traits: Any = None) -> bytes:
    """The ONNX model of `policy`'s actor (a loaded policy, a checkpoint path or 'default') as bytes; at a
    personality strength other than 1 the graph computes npc_brains.personality's logits itself (twice the rows
    inside, the same inputs and outputs)."""
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ExportError(f"--opset: expected {MIN_OPSET}..{MAX_OPSET} (15 for Unity Sentis and Unreal NNE), "
                          f"got {opset}")
    try:
        strength = check_personality(personality_strength, "--personality-strength")
        traits = check_traits(personality_traits, "--personality-traits")
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    onnx = _need("onnx")
    import io

    import torch

    tp = _torch_policy(policy)
    personality = None
    if strength != 1.0:
        try:
            cols = trait_columns(tp.observation_layout, "--personality-strength", traits)
        except ValueError as exc:
            raise ExportError(str(exc)) from None
        keep = np.ones(tp.spec.obs_dim, np.float32)
        keep[cols] = 0.0
        personality = (strength, keep)
    model = _actor_graph(tp.actor, opset, personality)
    if model is None:  # an actor class of its own: traced by torch
        graph = _Exported.build(tp.actor.cpu(), personality)
        obs = torch.zeros((2, tp.spec.obs_dim), dtype=torch.float32)
        mask = torch.ones((2, tp.spec.n_actions), dtype=torch.bool)
        buf = io.BytesIO()
        import warnings

        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notes: opset 15 needs it
            torch.onnx.export(graph, (obs, mask), buf, input_names=["obs", "mask"],
                              output_names=["probs", "action"],
                              dynamic_axes={"obs": {0: "batch"}, "mask": {0: "batch"}, "probs": {0: "batch"},
                                            "action": {0: "batch"}},
                              opset_version=opset, dynamo=False, do_constant_folding=True)
        model = onnx.load_from_string(buf.getvalue())
    for key, value in metadata(tp, opset, strength, traits).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    model.producer_name = "village-npc"
    onnx.checker.check_model(model)
    return model.SerializeToString()


def export_onnx(policy: Any, out: str | Path, opset: int = DEFAULT_OPSET, *, personality_strength: float = 1.0,
                personality_traits: Any = None) -> Path:
    """Write the ONNX model atomically (a temporary file renamed into place); returns the path."""
    data = export_bytes(policy, opset, personality_strength=personality_strength,
                        personality_traits=personality_traits)
    out = Path(out)
    if out.parent and not out.parent.is_dir():
        raise ExportError(f"--onnx {out}: the directory {out.parent} does not exist")
    return write_atomically(out, data)


_PROBS = ["probs"]


class OnnxPolicy:
    """An exported actor in onnxruntime (one thread, no spinning), behind the `Policy` interface. `act` feeds
    the caller's arrays as they are when they already have the graph's dtypes (no copies)."""

    backend = "onnx"
    temperature: float = 1.0  # sampling temperature (npc_brains.runtime.set_temperature); 1 samples as trained

    def __init__(self, model: bytes | str | Path, name: str | None = None, seed: int | None = 0):
        ort = _need("onnxruntime")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
        source = model if isinstance(model, bytes) else str(model)
        try:
            self.session = ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own types for unreadable or foreign files
            raise ExportError(f"cannot load the ONNX model: {str(exc)[:300]}") from None
        meta = self.session.get_modelmeta().custom_metadata_map
        if meta.get("village.format") != "village-npc-actor/1":
            raise ExportError("the ONNX model was not exported by `village export` (no village.format metadata)")
        self.meta = meta
        self.name = name or meta["village.policy"]
        self.obs_dim = int(meta["village.obs_dim"])
        self.n_actions = int(meta["village.n_actions"])
        self.action_names: list[str] = json.loads(meta["village.action_names"])
        self.observation_layout: list[str] = json.loads(meta["village.observation_layout"])
        self.config = {"tuning": json.loads(meta.get("village.tuning", "{}"))}
        # a model exported at another personality strength computes it in its graph: it cannot be strengthened again
        self.baked_personality = float(meta.get("village.personality_strength", "1.0"))
        self.rng = np.random.default_rng(seed)
        self._run = self.session.run

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False, with_probs: bool = False,
            with_values: bool = False) -> PolicyOutput:
        if obs.dtype != np.float32 or not obs.flags.c_contiguous:
            obs = np.ascontiguousarray(obs, np.float32)
        if mask.dtype != np.bool_ or not mask.flags.c_contiguous:
            mask = np.ascontiguousarray(mask, bool)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"obs: expected shape (R, {self.obs_dim}), got {obs.shape}")
        if mask.shape != (obs.shape[0], self.n_actions):
            raise ValueError(f"mask: expected shape ({obs.shape[0]}, {self.n_actions}), got {mask.shape}")
        if deterministic:
            probs, actions = self._run(None, {"obs": obs, "mask": mask})
            if with_probs:
                probs = tempered_probs(probs, self.temperature)
        else:  # inverse CDF; a masked action has probability exactly 0, so it is never reached
            (probs,) = self._run(_PROBS, {"obs": obs, "mask": mask})
            probs = tempered_probs(probs, self.temperature)
            cdf = probs.cumsum(1)
            u = self.rng.random(len(obs), dtype=np.float32)
            u *= cdf[:, -1]
            actions = (cdf > u[:, None]).argmax(1)
        return PolicyOutput(actions, probs if with_probs else None)


def onnx_policy(policy: Any, seed: int | None = 0) -> OnnxPolicy:
    """A policy in onnxruntime: an `.onnx` file as it is, or a trained policy (a TorchPolicy, a checkpoint
    path or 'default') exported in memory first."""
    if isinstance(policy, (str, Path)) and str(policy).endswith(".onnx"):
        if not Path(policy).is_file():
            raise ExportError(f"no such ONNX model {str(policy)!r}")
        return OnnxPolicy(Path(policy), seed=seed)
    tp = _torch_policy(policy)
    return OnnxPolicy(export_bytes(tp), name=tp.name, seed=seed)
