"""Training configuration: one typed dataclass, algorithm presets, TOML loading and validation.

No torch here, so the CLI can parse and validate options before paying for the torch import.
A field left at None takes its value from the algorithm preset (`resolved()`), so `--algo mappo`
and `--algo drmas --no-shaping` are both one flag away.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

ON_POLICY_ALGOS = ("ippo", "mappo", "drmas")  # the PPO family: npc_brains.trainer
OFF_POLICY_ALGOS = ("qmix", "maddpg")  # replay learners: npc_brains.offpolicy
ALGOS = ON_POLICY_ALGOS + OFF_POLICY_ALGOS
ADV_NORMS = ("none", "global", "agent", "role")
CONTRASTIVE_POSITIVES = ("next", "village")
COLLECTORS = ("auto", "thread", "process")
ROLLBACK_CRITERIA = ("oscillation", "drawdown", "conflict", "cooperation")
DEVICES = ("auto", "cpu", "cuda")
SCENARIOS = ("mixed", "random_kill", "world", "none")  # engine.sim.SCENARIOS (no engine import here)

# Dr. MAS components and the value each algorithm gives them. Everything else is shared.
PRESETS: dict[str, dict[str, Any]] = {
    "ippo": dict(central_critic=False, value_norm=False, adv_norm="global", film=False, contrastive=0.0,
                 constraint=0.0, shaping=False, sync_check=False, double_buffer=False, rollback=False),
    "mappo": dict(central_critic=True, value_norm=True, adv_norm="global", film=False, contrastive=0.0,
                  constraint=0.0, shaping=False, sync_check=False, double_buffer=False, rollback=False),
    "drmas": dict(central_critic=True, value_norm=True, adv_norm="agent", film=True, contrastive=0.01,
                  constraint=0.03, shaping=True, sync_check=True, double_buffer=True, rollback=True),
}
# the off-policy learners use none of the PPO family's components (their switches are recorded as off)
PRESETS.update({algo: dict(PRESETS["ippo"], adv_norm="none") for algo in OFF_POLICY_ALGOS})
COMPONENTS: tuple[str, ...] = tuple(PRESETS["drmas"])


class ConfigError(ValueError):
    """A bad configuration value: the message names the field and what was expected."""


@dataclass(frozen=True)
class TrainConfig:
    """Every option of `village train`; the TOML config file uses the same keys."""

    # --- what to train on
    world: str = "village-v1"  # id, file, generated:N[:SEED], or a comma-separated pool of worlds (sizes may differ)
    env: str | None = None  # "module:factory" for any PettingZoo ParallelEnv with discrete actions
    scenario: str = "mixed"  # mixed: 1-3 killings per episode, sometimes a rampage; random_kill; world; none
    slots: int = 4
    trait_noise: float = 0.2  # per-episode Gaussian jitter of every NPC's traits (domain randomisation)
    max_ticks: int = 144
    # engine Tuning fields to override for training (docs/engine.md), e.g. {"w_alive": 1.0}: lever ablations
    tuning: dict[str, float | int | bool] = field(default_factory=dict)
    # --- run
    algo: str = "drmas"
    steps: int = 200_000  # NPC-steps (rows of the flat vector env), rounded up to whole updates
    envs: int = 0  # villages stepped in parallel; 0 = auto (each finishes ~4 episodes, at most 64)
    seed: int = 0
    init_from: str | None = None  # start the actor from this policy (default, mappo or a file): fine-tuning
    device: str = "auto"
    run_dir: str = "runs/default"
    checkpoint_every: int = 10  # updates
    # where the double-buffered batch is collected: "thread", "process" (a child process: no GIL shared with the
    # learner; CPU only) or "auto" (a process on a multi-core CPU for runs of 8 updates or more)
    collector: str = "auto"
    threads: int = 0  # torch CPU threads; 0 = auto (1 per thread of work when double buffering on CPU)
    # --- PPO (shared by all algorithms)
    # ticks collected per update (rows per update = envs * num_agents * rollout); 128 villages x 32 ticks step
    # faster but learned a tenth less by 1M NPC-steps (docs/training.md)
    rollout: int = 64
    # the update's shape; 0 = auto (update_shape): one epoch on CPU, where the update is what limits
    # throughput, four on CUDA, where the environment is; minibatches for 16 gradient steps per update
    epochs: int = 0
    minibatches: int = 0
    lr: float = 3e-4
    lr_final_frac: float = 0.1  # cosine decay from lr to lr * lr_final_frac
    gamma: float = 0.99
    gae_lambda: float = 0.95
    # at the time limit, bootstrap with the critic's value of the final state instead of ending the return
    # there: an NPC's village goes on after the episode is cut (docs/training.md)
    bootstrap_truncated: bool = False
    clip: float = 0.2
    value_clip: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    ent_final_frac: float = 1.0  # cosine decay of the entropy bonus to ent_coef * this (1 = constant)
    max_grad_norm: float = 0.5
    hidden: int = 128
    slot_head: bool = True  # entity head: targeted logits from (self, slot) pairs, shared across slots
    # its per-slot layer's width: its activations (rows x slots x width) are the actor's largest; 32 trains
    # faster on CPU but aimed revenge worse (accuracy 0.91 against 0.995 at 64; docs/training.md)
    slot_hidden: int = 64
    # --- Dr. MAS components (None = the algorithm's preset, see PRESETS)
    central_critic: bool | None = None
    value_norm: bool | None = None
    adv_norm: str | None = None
    film: bool | None = None
    contrastive: float | None = None  # InfoNCE loss coefficient; 0 = off
    constraint: float | None = None  # KL-to-teacher coefficient; 0 = off
    shaping: bool | None = None
    sync_check: bool | None = None
    double_buffer: bool | None = None
    rollback: bool | None = None
    # --- component details
    intent_dim: int = 64
    contrastive_positive: str = "next"  # "next": own next step; "village": a village-mate at the same tick
    contrastive_temperature: float = 0.1
    contrastive_samples: int = 256  # anchors per minibatch
    teacher_tau: float = 0.1  # EMA rate of the teacher per update
    # the teacher's personality strength (npc_brains.personality): its NPCs' logits moved this many times as far from
    # a neutral villager's, so the KL pulls each personality further apart; 1 = the teacher as it is
    teacher_personality: float = 1.0
    # the traits that strength acts on: "all" or comma-separated names (npc_brains.personality.check_traits); only
    # these are set to the neutral villager's 0.5 in the teacher's reference observation
    teacher_personality_traits: str = "all"
    # share of each batch's rows on which the KL to the teacher is evaluated, scaled up by 1 / share so the
    # constraint's expected gradient is the same as on every row; its forward pass costs this share of a full one
    constraint_rows: float = 0.25
    constraint_many_agents: float = 0.4  # constraint weight raised by this fraction above 8 agents
    shaping_scale: float = 0.2  # state-entropy bonus factor of the seed
    shaping_anneal: int = 10_000  # joint steps (one tick of one village) over which the weight goes 1 -> 0
    sync_threshold: float = 0.05  # KL(agent || population) above which an agent is pulled back
    sync_boost: float = 2.0  # constraint-weight multiplier for agents over the threshold
    sync_probe: int = 128  # probe states for the KL matrix
    replay_old_frac: float = 0.0  # 0.3 gives the seed's 7:3 new/old mix
    # stale (double-buffered) or replayed rows: clip around the actor as it is at the update's start (decoupled
    # PPO, one more forward pass over the batch) instead of around the policy that collected them
    proximal_clip: bool = True
    ratio_cap: float = 2.0  # importance weights of stale (double-buffered) or replayed rows are truncated here
    policy_delay: int = 1  # actor updated every this many updates (2-3 = the seed's delayed update)
    # --- stability monitor
    monitor_window: int = 5  # epochs in the oscillation window
    monitor_warmup: int = 3  # epochs before any judgement
    oscillation_max: float = 0.3
    cooperation_min: float = 0.15
    conflict_min: float = 0.25
    drawdown_max: float = 0.5  # fraction of the progress made so far that may be lost
    bad_epochs: int = 3
    rollback_on: tuple[str, ...] = ("oscillation", "drawdown")
    coop_every: int = 0  # epochs between cooperation-efficiency evaluations; 0 = never
    rollback_lr: float = 0.5
    rollback_constraint: float = 1.5
    rollback_explore: float = 1.1
    # --- off-policy learners (qmix, maddpg): EPyMARL's defaults (docs/training.md "Off-policy learners")
    replay_episodes: int = 5000  # episode replay capacity (allocated for at most the episodes a run collects)
    batch_episodes: int = 32  # episodes per gradient step
    updates_per_episode: float = 1.0  # gradient steps per collected episode (EPyMARL's episode runner: 1)
    q_lr: float = 5e-4  # Adam learning rate of the off-policy learners
    q_grad_clip: float = 10.0
    target_update: int = 200  # QMIX: gradient steps between hard target copies (capped at a twentieth of the run)
    target_tau: float = 0.01  # MADDPG: soft target update rate per gradient step
    epsilon_start: float = 1.0
    epsilon_finish: float = 0.05
    epsilon_anneal: int = 50_000  # joint steps (ticks of one env), capped at half the run's joint steps
    mixer_embed: int = 32
    hypernet_hidden: int = 64
    double_q: bool = True
    td_lambda: float = 0.0  # 0 = one-step TD targets; > 0 = TD(lambda) over the episode
    gumbel_temperature: float = 1.0  # MADDPG's straight-through Gumbel-softmax
    actor_reg: float = 1e-3  # MADDPG: weight of the actor's squared-logit penalty

    def __post_init__(self) -> None:
        validate(self)

    # --- derived values (never mutate a parsed config)
    def resolved(self) -> TrainConfig:
        """A copy with every component switch filled in from the algorithm preset."""
        preset = PRESETS[self.algo]
        return dataclasses.replace(self, **{k: v for k, v in preset.items() if getattr(self, k) is None})

    @property
    def worlds(self) -> list[str]:
        return [w.strip() for w in self.world.split(",") if w.strip()]

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, dict):
                value = dict(value)
            out[f.name] = value
        return out


GRADIENT_STEPS = 16  # optimiser steps per update when --minibatches is auto


def update_shape(cfg: TrainConfig, device_type: str) -> tuple[int, int]:
    """(epochs, minibatches) with 0 = auto filled in for a device type ("cpu" or "cuda").

    Both defaults take 16 gradient steps per update, which is what finds revenge and flight in the village
    (two epochs of two minibatches do not; docs/training.md). On CPU each row is used once: the update's
    arithmetic, not the environment, sets the throughput there, and one epoch of 16 minibatches learns the
    same reactions as four epochs of four at equal wall-clock. On CUDA the update is cheap and the
    environment is the bottleneck, so rows are reused four times (four epochs of four)."""
    epochs = cfg.epochs or (1 if device_type == "cpu" else 4)
    minibatches = cfg.minibatches or max(1, GRADIENT_STEPS // epochs)
    return epochs, minibatches


def engine_tuning(overrides: dict[str, Any]) -> Any:
    """The engine's `Tuning` with `overrides` applied (npc_brains.tuning); ConfigError names a bad key or value."""
    from npc_brains.tuning import TuningError
    from npc_brains.tuning import engine_tuning as build  # the engine import waits until a run needs it

    try:
        return build(overrides)
    except TuningError as exc:
        raise ConfigError(str(exc)) from None


def _check(cond: bool, name: str, expected: str, value: Any) -> None:
    if not cond:
        raise ConfigError(f"{name}: expected {expected}, got {value!r}")


def _type_error(annotation: str, value: Any) -> str | None:
    """What a field of this annotation expects, where `value` is not of its type; None where it is.

    TOML has real booleans, so a string such as "false" is refused rather than read by truthiness (which would
    turn a switch on); checked first, so every later comparison sees the type it expects."""
    if value is None and annotation.endswith("| None"):
        return None
    base = annotation.removesuffix(" | None")
    if base == "bool":
        return None if isinstance(value, bool) else "true or false"
    if base == "str":
        return None if isinstance(value, str) else "a string"
    if base == "int":
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if base == "float":
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else "a number"
    return None


def validate(cfg: TrainConfig) -> None:
    for f in fields(cfg):
        expected = _type_error(str(f.type), getattr(cfg, f.name))
        if expected is not None:
            raise ConfigError(f"{f.name}: expected {expected}, got {getattr(cfg, f.name)!r}")
    _check(cfg.algo in ALGOS, "algo", f"one of {', '.join(ALGOS)}", cfg.algo)
    _check(isinstance(cfg.trait_noise, (int, float)) and 0 <= cfg.trait_noise <= 1, "trait_noise",
           "a number in [0, 1]", cfg.trait_noise)
    _check(isinstance(cfg.tuning, dict), "tuning", "a table of engine Tuning fields", cfg.tuning)
    engine_tuning(cfg.tuning)
    _check(cfg.scenario in SCENARIOS, "scenario", f"one of {', '.join(SCENARIOS)}", cfg.scenario)
    _check(cfg.device in DEVICES or cfg.device.startswith("cuda:"), "device", "auto, cpu, cuda or cuda:N",
           cfg.device)
    for name in ("steps", "rollout", "hidden", "intent_dim", "slots", "slot_hidden",
                 "max_ticks", "checkpoint_every", "policy_delay", "monitor_window", "bad_epochs",
                 "sync_probe", "contrastive_samples"):
        value = getattr(cfg, name)
        _check(isinstance(value, int) and not isinstance(value, bool) and value >= 1, name, "an integer >= 1",
               value)
    for name in ("lr", "contrastive_temperature", "rollback_explore"):
        value = getattr(cfg, name)
        _check(isinstance(value, (int, float)) and value > 0, name, "a number > 0", value)
    for name in ("gamma", "gae_lambda", "lr_final_frac", "ent_final_frac", "teacher_tau"):
        value = getattr(cfg, name)
        _check(isinstance(value, (int, float)) and 0 <= value <= 1, name, "a number in [0, 1]", value)
    for name in ("clip", "value_clip", "vf_coef", "ent_coef", "max_grad_norm", "shaping_scale",
                 "sync_threshold", "sync_boost", "constraint_many_agents", "oscillation_max", "drawdown_max",
                 "conflict_min", "ratio_cap", "rollback_lr", "rollback_constraint"):
        value = getattr(cfg, name)
        _check(isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0, name,
               "a number >= 0", value)
    for name in ("contrastive", "constraint"):
        value = getattr(cfg, name)
        _check(value is None or (isinstance(value, (int, float)) and value >= 0), name, "a number >= 0", value)
    _check(isinstance(cfg.teacher_personality, (int, float)) and not isinstance(cfg.teacher_personality, bool)
           and 0 <= cfg.teacher_personality <= 10, "teacher_personality", "a number from 0 to 10",
           cfg.teacher_personality)
    from npc_brains.personality import check_traits  # lazily: the config module stays import-light

    try:
        check_traits(cfg.teacher_personality_traits, "teacher_personality_traits")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    _check(isinstance(cfg.constraint_rows, (int, float)) and not isinstance(cfg.constraint_rows, bool)
           and 0 < cfg.constraint_rows <= 1, "constraint_rows", "a number in (0, 1]", cfg.constraint_rows)
    _check(0 <= cfg.replay_old_frac < 1, "replay_old_frac", "a number in [0, 1)", cfg.replay_old_frac)
    _check(cfg.collector in COLLECTORS, "collector", f"one of {', '.join(COLLECTORS)}", cfg.collector)
    _check(cfg.adv_norm is None or cfg.adv_norm in ADV_NORMS, "adv_norm", f"one of {', '.join(ADV_NORMS)}",
           cfg.adv_norm)
    _check(cfg.contrastive_positive in CONTRASTIVE_POSITIVES, "contrastive_positive",
           f"one of {', '.join(CONTRASTIVE_POSITIVES)}", cfg.contrastive_positive)
    _check(isinstance(cfg.rollback_on, tuple) and all(c in ROLLBACK_CRITERIA for c in cfg.rollback_on),
           "rollback_on", f"a list drawn from {', '.join(ROLLBACK_CRITERIA)}", cfg.rollback_on)
    _check(isinstance(cfg.shaping_anneal, int) and cfg.shaping_anneal >= 0, "shaping_anneal",
           "an integer >= 0", cfg.shaping_anneal)
    _check(isinstance(cfg.envs, int) and not isinstance(cfg.envs, bool) and cfg.envs >= 0, "envs",
           "an integer >= 0 (0 = auto)", cfg.envs)
    for name in ("epochs", "minibatches"):
        value = getattr(cfg, name)
        _check(isinstance(value, int) and not isinstance(value, bool) and value >= 0, name,
               "an integer >= 0 (0 = auto)", value)
    _check(isinstance(cfg.threads, int) and not isinstance(cfg.threads, bool) and cfg.threads >= 0, "threads",
           "an integer >= 0 (0 = auto)", cfg.threads)
    _check(isinstance(cfg.coop_every, int) and cfg.coop_every >= 0, "coop_every", "an integer >= 0",
           cfg.coop_every)
    _check(isinstance(cfg.monitor_warmup, int) and cfg.monitor_warmup >= 0, "monitor_warmup",
           "an integer >= 0", cfg.monitor_warmup)
    for name in ("replay_episodes", "batch_episodes", "target_update", "epsilon_anneal", "mixer_embed",
                 "hypernet_hidden"):
        value = getattr(cfg, name)
        _check(isinstance(value, int) and not isinstance(value, bool) and value >= 1, name, "an integer >= 1",
               value)
    for name in ("q_lr", "gumbel_temperature", "updates_per_episode"):
        value = getattr(cfg, name)
        _check(isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0, name,
               "a number > 0", value)
    for name in ("target_tau", "epsilon_start", "epsilon_finish", "td_lambda"):
        value = getattr(cfg, name)
        _check(isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1, name,
               "a number in [0, 1]", value)
    for name in ("q_grad_clip", "actor_reg"):
        value = getattr(cfg, name)
        _check(isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0, name,
               "a number >= 0", value)
    _check(bool(cfg.worlds) or cfg.env is not None, "world", "a world id, file or generated:N", cfg.world)
    _check(cfg.env is None or (":" in cfg.env and all(cfg.env.split(":", 1))), "env", "'module:factory'",
           cfg.env)


_FIELD_TYPES = {f.name: f for f in fields(TrainConfig)}
# float options a TOML file may write as an integer (`q_lr = 1`)
FLOAT_FIELDS = ("lr", "gamma", "gae_lambda", "clip", "q_lr", "target_tau", "epsilon_start", "epsilon_finish",
                "td_lambda", "q_grad_clip", "actor_reg", "gumbel_temperature", "updates_per_episode")


def config_from_dict(data: dict[str, Any], *, source: str = "config") -> TrainConfig:
    """Build a config from a flat mapping (a TOML file, parsed flags); unknown keys are an error."""
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in _FIELD_TYPES:
            raise ConfigError(f"{source}: unknown option {key!r}")
        if name == "rollback_on":
            if isinstance(value, str):
                value = tuple(v.strip() for v in value.split(",") if v.strip())
            elif isinstance(value, list):
                value = tuple(value)
        if name in FLOAT_FIELDS and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        kwargs[name] = value
    return TrainConfig(**kwargs)


def toml_module() -> Any:
    """tomllib (Python 3.11+) or its backport tomli."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib


def load_toml_config(path: str | Path) -> dict[str, Any]:
    """Read a TOML config file into a flat mapping (a [train] table is also accepted)."""
    tomllib = toml_module()
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--config: no such file {str(p)!r}")
    try:
        with p.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if "train" in data and isinstance(data["train"], dict):
        data = {**{k: v for k, v in data.items() if k != "train"}, **data["train"]}
    return data


def default_fields() -> dict[str, Any]:
    return {f.name: f.default for f in fields(TrainConfig) if f.default is not dataclasses.MISSING}


__all__ = ["ALGOS", "OFF_POLICY_ALGOS", "ON_POLICY_ALGOS",
           "ADV_NORMS", "COMPONENTS", "PRESETS", "ConfigError", "TrainConfig", "config_from_dict",
           "load_toml_config", "default_fields"]
