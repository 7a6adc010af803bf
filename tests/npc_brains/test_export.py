"""ONNX export of the actor: the model's interface and metadata, parity with the numpy runtime on thousands of
recorded observations, `village export`'s errors, `village serve --backend onnx`, and no onnx import unasked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the [onnx] extra is not installed")
pytest.importorskip("onnxruntime", reason="the [onnx] extra is not installed")

from engine.vec_env import make_vec_env  # noqa: E402
from npc_brains import bundled_policy, load_policy  # noqa: E402
from npc_brains.export import ExportError, OnnxPolicy, export_onnx, onnx_policy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not bundled_policy("default").is_file(), reason="the bundled default policy is missing")


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    return export_onnx("default", tmp_path_factory.mktemp("onnx") / "default.onnx")


@pytest.fixture(scope="module")
def recorded() -> tuple[np.ndarray, np.ndarray]:
    """Observations and masks of 16 villages x 12 NPCs over 24 ticks of the default policy (4608 rows): before
    and after the scenario's killing, with the policy's own sampled actions driving the villages."""
    policy = load_policy("default", seed=3)
    env = make_vec_env("village-v1", num_envs=16, seed=5)
    obs, info = env.reset(5)
    rows_obs, rows_mask = [], []
    for _ in range(24):
        mask = info["action_mask"]
        rows_obs.append(obs.copy())
        rows_mask.append(mask.copy())
        obs, _, _, _, info = env.step(policy.act(obs, mask).actions)
    return np.concatenate(rows_obs), np.concatenate(rows_mask)


def test_model_interface_and_metadata(exported):
    model = onnx.load(str(exported))
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) <= 15
    inputs = {i.name: i for i in model.graph.input}
    outputs = {o.name: o for o in model.graph.output}
    assert list(inputs) == ["obs", "mask"] and list(outputs) == ["probs", "action"]
    for value in (*inputs.values(), *outputs.values()):
        assert value.type.tensor_type.shape.dim[0].dim_param == "batch"  # the batch axis is dynamic
    assert inputs["obs"].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert inputs["mask"].type.tensor_type.elem_type == onnx.TensorProto.BOOL
    meta = {p.key: p.value for p in model.metadata_props}
    policy = load_policy("default")
    assert json.loads(meta["village.observation_layout"]) == policy.observation_layout
    assert json.loads(meta["village.action_names"]) == policy.action_names
    assert meta["village.protocol_version"] == "1" and meta["village.obs_dim"] == str(policy.obs_dim)
    from bridge import protocol as P

    assert int(meta["village.protocol_version"]) == P.PROTOCOL_VERSION


def test_parity_with_the_numpy_runtime_on_recorded_observations(exported, recorded):
    obs, mask = recorded
    assert len(obs) >= 4000 and (~mask).any()  # some actions are masked
    ref = load_policy("default").act(obs, mask, deterministic=True, with_probs=True)
    out = OnnxPolicy(exported).act(obs, mask, deterministic=True, with_probs=True)
    assert np.array_equal(out.actions, ref.actions)
    assert np.abs(out.probs - ref.probs).max() < 1e-5
    assert (out.probs[~mask] == 0).all()
    for batch in (1, 7, 300):  # the dynamic batch axis
        part = OnnxPolicy(exported).act(obs[:batch], mask[:batch], deterministic=True)
        assert np.array_equal(part.actions, ref.actions[:batch])


def test_sampling_respects_the_mask_and_the_seed(exported, recorded):
    obs, mask = recorded[0][:500], recorded[1][:500]
    a = OnnxPolicy(exported, seed=1).act(obs, mask).actions
    assert mask[np.arange(len(a)), a].all()
    assert np.array_equal(a, OnnxPolicy(exported, seed=1).act(obs, mask).actions)


def test_sampling_draws_the_inverse_cdf_of_the_probabilities(exported, recorded):
    """The draw inside the graph is the inverse CDF of `probs` at the policy's uniform numbers."""
    obs, mask = recorded[0][:1000], recorded[1][:1000]
    out = OnnxPolicy(exported, seed=4).act(obs, mask, with_probs=True)
    u = np.random.default_rng(4).random(len(obs), dtype=np.float32)
    cdf = out.probs.cumsum(1)
    assert np.array_equal(out.actions, (cdf > (u * cdf[:, -1])[:, None]).argmax(1))
    assert out.actions.dtype == np.int64


def test_temperature_tempers_the_graphs_probabilities_as_the_numpy_runtime_does(exported, recorded):
    from npc_brains.runtime import set_temperature

    obs, mask = recorded[0][:1000], recorded[1][:1000]
    ref, onnx_side = load_policy("default"), OnnxPolicy(exported, seed=4)
    for policy in (ref, onnx_side):
        set_temperature(policy, 0.4)
    want = ref.act(obs, mask, deterministic=True, with_probs=True).probs
    greedy = onnx_side.act(obs, mask, deterministic=True, with_probs=True)
    assert np.abs(greedy.probs - want).max() < 1e-4
    out = onnx_side.act(obs, mask, with_probs=True)  # sampled: the inverse CDF of the tempered probabilities
    u = np.random.default_rng(4).random(len(obs), dtype=np.float32)
    cdf = out.probs.cumsum(1)
    assert np.abs(out.probs - want).max() < 1e-4
    assert np.array_equal(out.actions, (cdf > (u * cdf[:, -1])[:, None]).argmax(1))


def test_the_written_graph_equals_the_traced_one(recorded):
    """The actor written node by node (few nodes) computes what torch's tracer of its forward does."""
    from npc_brains.export import export_bytes
    from npc_brains.networks import Actor
    from npc_brains.resolve import load_policy as load_torch

    obs, mask = recorded[0][:2000], recorded[1][:2000]
    tp = load_torch("default", backend="torch")
    written = onnx.load_from_string(export_bytes(tp))
    assert len(written.graph.node) <= 25
    tp.actor.__class__ = type("OtherActor", (Actor,), {})  # a class _actor_graph does not know: traced
    traced = export_bytes(tp)
    a = OnnxPolicy(written.SerializeToString()).act(obs, mask, deterministic=True, with_probs=True)
    b = OnnxPolicy(traced).act(obs, mask, deterministic=True, with_probs=True)
    assert np.array_equal(a.actions, b.actions) and np.abs(a.probs - b.probs).max() < 1e-5
    assert len(onnx.load_from_string(traced).graph.node) > len(written.graph.node)


@pytest.mark.parametrize(("opset", "traits"), [(15, None), (18, "sociability,diligence")])
def test_a_baked_personality_strength_computes_what_the_runtime_does(recorded, opset, traits):
    """`village export --personality-strength S`: the graph's probabilities are npc_brains.personality's, written
    by hand and traced alike, the inputs and outputs unchanged; such a model cannot be strengthened again."""
    from npc_brains.export import export_bytes
    from npc_brains.networks import Actor
    from npc_brains.personality import PersonalityStrength, with_personality_strength
    from npc_brains.resolve import load_policy as load_torch

    obs, mask = recorded[0][:1500], recorded[1][:1500]
    want = PersonalityStrength(load_policy("default"), 2.5, traits=traits).guided_probs(obs, mask)
    tp = load_torch("default", backend="torch")
    written = export_bytes(tp, opset, personality_strength=2.5, personality_traits=traits)
    tp.actor.__class__ = type("OtherActor", (Actor,), {})  # traced by torch
    traced = export_bytes(tp, opset, personality_strength=2.5, personality_traits=traits)
    for model in (written, traced):
        policy = OnnxPolicy(model)
        out = policy.act(obs, mask, deterministic=True, with_probs=True)
        assert np.abs(out.probs - want).max() < 1e-4 and np.array_equal(out.actions, want.argmax(1))
        assert [i.name for i in policy.session.get_inputs()] == ["obs", "mask"]
        assert policy.baked_personality == 2.5
        assert json.loads(policy.meta["village.personality_traits"]) == (
            ["sociability", "diligence"] if traits else ["bravery", "aggression", "empathy", "sociability",
                                                         "diligence"])
        with pytest.raises(ValueError, match="was exported at personality strength 2.5"):
            with_personality_strength(policy, 2.0)
    plain = OnnxPolicy(export_bytes("default"))
    assert plain.baked_personality == 1.0 and plain.meta["village.personality_strength"] == "1.0"


def test_baselines_and_foreign_files_are_clear_errors(tmp_path):
    from npc_brains.baselines import ScriptedPolicy

    with pytest.raises(ExportError, match="not a trained network"):
        onnx_policy(ScriptedPolicy(slots=4))
    foreign = tmp_path / "foreign.onnx"
    foreign.write_bytes(b"not a model")
    with pytest.raises(ExportError, match="cannot load the ONNX model"):
        OnnxPolicy(foreign)


def _village(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "village", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_village_export_command(tmp_path):
    out = _village("export", "--onnx", str(tmp_path / "p.onnx"))
    assert out.returncode == 0 and "opset 15" in out.stdout, out.stderr
    assert OnnxPolicy(tmp_path / "p.onnx").n_actions == 29
    strong = _village("export", "--onnx", str(tmp_path / "s.onnx"), "--personality-strength", "2")
    assert strong.returncode == 0 and "at personality strength 2" in strong.stdout, strong.stderr
    for args, needle in ((["--policy", "scripted"], "baseline has no network"), (["--opset", "9"], "--opset"),
                         (["--policy", str(tmp_path / "none.pt")], "cannot load policy"),
                         (["--personality-strength", "-1"], "--personality-strength: expected a number"),
                         (["--personality-traits", "empathy"], "--personality-traits: it sets which traits"),
                         (["--personality-strength", "2", "--personality-traits", "wit"], "--personality-traits")):
        bad = _village("export", "--onnx", str(tmp_path / "q.onnx"), *args)
        assert bad.returncode == 2 and needle in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    assert not (tmp_path / "q.onnx").exists()


def test_serve_backend_onnx_answers_like_numpy(recorded, exported):
    from bridge.client import BridgeClient
    from bridge.server import BridgeServer, ServerConfig

    obs, mask = recorded[0][:16], recorded[1][:16]
    expected = load_policy("default").act(obs, mask, deterministic=True).actions
    for spec in ("default", str(exported)):
        srv = BridgeServer(ServerConfig(bind="tcp://127.0.0.1:0", policy=spec, backend="onnx"))
        assert srv.policy.backend == "onnx"
        srv.run_in_thread()
        try:
            with BridgeClient(srv.endpoint) as c:
                actions, _ = c.act(obs, mask, deterministic=True)
            assert np.array_equal(actions, expected)
        finally:
            srv.stop()
    from bridge.service import ConfigError

    with pytest.raises(ConfigError, match="--backend onnx: .*not a trained network"):
        BridgeServer(ServerConfig(bind="tcp://127.0.0.1:0", policy="scripted", backend="onnx"))


def test_nothing_imports_onnx_unless_asked():
    code = ("import sys, bridge.server, bridge.service, village.cli, village.cmd_serve, npc_brains.runtime, "
            "npc_brains.export; print([m for m in ('onnx', 'onnxruntime', 'onnxscript', 'websockets') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
