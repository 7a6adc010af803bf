"""`village train`: headless training of NPC brains (Dr. MAS, MAPPO or IPPO) on CPU or GPU.

Every option of npc_brains.config.TrainConfig is a flag (underscores become dashes) and a key of the
--config TOML file. Precedence: built-in defaults < checkpoint (with --resume) < --config file < flags.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from village.cli import UserError

HELP = {
    "world": "world id, TOML file, generated:N[:SEED], or a comma-separated pool of worlds (sizes may differ)",
    "env": "train on a PettingZoo ParallelEnv instead: 'module:factory' (discrete actions)",
    "scenario": "training episodes: mixed (1-3 killings by the player, sometimes a rampage on whoever is "
                "nearest), random_kill (one killing), world (the world file's events), none",
    "trait_noise": "per-episode Gaussian jitter of the NPCs' traits, so the policy meets many personalities",
    "slot_head": "entity head: one small MLP scores every (NPC, slot) pair for the targeted actions",
    "slot_hidden": "width of the entity head's per-slot layer (32 trains about an eighth faster on CPU but aims "
                   "revenge worse)",
    "algo": "ippo | mappo | drmas (Dr. MAS components on by default; switch each off alone) | qmix | maddpg "
            "(off-policy, episode replay; docs/training.md)",
    "steps": "training budget in NPC-steps (rounded up to whole updates)",
    "envs": "villages stepped in parallel (0 = auto: enough for ~4 episodes each, at most 64)",
    "device": "auto | cpu | cuda | cuda:N",
    "seed": "random seed",
    "init_from": "start from a trained policy's actor instead of random weights: default, mappo or a policy file "
                 "with the same observation and action layout, to fine-tune it on your worlds; the critic learns "
                 "afresh, and the policy's engine tuning is not carried over (pass its --tuning flags, "
                 "docs/training.md)",
    "run_dir": "where metrics.jsonl, checkpoints/ and policy.pt go",
    "checkpoint_every": "write checkpoints/last.pt every this many updates",
    "rollout": "ticks collected per update",
    "collector": "where the double-buffered batch is collected: thread, process (a child process, CPU only: "
                 "no interpreter lock shared with the learner) or auto (a process on a multi-core CPU for runs of 8 "
                 "updates or more)",
    "epochs": "PPO epochs over each batch (0 = auto: 1 on CPU, 4 on CUDA)",
    "minibatches": "minibatches per epoch (0 = auto: 16 gradient steps per update, i.e. 16 / epochs)",
    "central_critic": "centralised critic on the village's global state (MAPPO, Dr. MAS)",
    "value_norm": "running normalisation of value targets",
    "adv_norm": "advantage normalisation: none | global | agent (Dr. MAS) | role",
    "film": "personality adaptation: FiLM on traits and role",
    "contrastive": "InfoNCE coefficient of the intent encoder (0 = off)",
    "constraint": "KL-to-EMA-teacher coefficient (0 = off)",
    "constraint_rows": "share of each batch's rows on which the KL to the teacher is evaluated (scaled up by "
                       "1 / share: the same expected gradient for a fraction of the teacher's forward pass)",
    "shaping": "dynamic reward shaping (alignment x state entropy, annealed to 0)",
    "sync_check": "global sync check: KL matrix, pull back diverging agents, prioritised sampling",
    "double_buffer": "collect the next batch in a thread while the learner updates",
    "rollback": "roll back to the last good state after bad epochs",
    "bootstrap_truncated": "at the episode's time limit, bootstrap the return with the critic's value of the final "
                           "state (the village goes on) instead of ending it there",
    "replay_old_frac": "fraction of replayed old rows in each minibatch (0.3 = the seed's 7:3)",
    "proximal_clip": "stale (double-buffered) or replayed rows: clip around the actor at the update's start "
                     "(decoupled PPO; one more forward pass) instead of around the policy that collected them",
    "ratio_cap": "truncation of the importance weights of stale (double-buffered) or replayed rows",
    "policy_delay": "update the actor every N updates (2-3 = delayed policy update)",
    "rollback_on": "comma-separated criteria that make an epoch bad: oscillation,drawdown,conflict,cooperation",
    "coop_every": "epochs between cooperation-efficiency probes (0 = never)",
    "slots": "others each NPC observes (the K most salient: kin, liked, feared, nearby); targeted actions aim at "
             "them, so a policy only runs where it was trained with the same number",
    "max_ticks": "episode length in ticks (a tick is 10 game minutes, so 144 is one day)",
    "threads": "torch CPU threads (0 = auto: one per busy thread of work when double buffering on CPU)",
    "lr": "Adam learning rate at the start of the cosine decay",
    "lr_final_frac": "the learning rate ends at lr times this (cosine decay over the run)",
    "gamma": "discount factor of returns",
    "gae_lambda": "GAE lambda: the bias/variance trade-off of the advantage estimate",
    "clip": "PPO ratio clip range",
    "value_clip": "clip range of value updates around the old value, in normalised units (only with "
                  "--value-norm)",
    "vf_coef": "weight of the critic's loss in the total loss",
    "ent_coef": "weight of the entropy bonus at the start (keeps exploring)",
    "ent_final_frac": "the entropy bonus ends at ent_coef times this (cosine decay; 1 = constant)",
    "max_grad_norm": "gradients are clipped to this global norm",
    "hidden": "width of the actor's and critic's hidden layers",
    "intent_dim": "width of the intent encoder's output (the shared representation the contrastive loss shapes)",
    "contrastive_positive": "positive pair of the contrastive loss: next (the NPC's own next step) or village "
                            "(a village-mate at the same tick)",
    "contrastive_temperature": "InfoNCE temperature (lower: sharper separation of positives from negatives)",
    "contrastive_samples": "anchors per minibatch for the contrastive loss",
    "teacher_tau": "EMA rate at which the constraint's teacher follows the policy, per update",
    "teacher_personality": "the constraint's teacher plays its personalities this many times as strongly "
                           "(npc_brains.personality; with --teacher-tau 0 a fixed, more personal target for the KL)",
    "teacher_personality_traits": "the traits --teacher-personality strengthens: all, or comma-separated names among "
                                  "bravery, aggression, empathy, sociability, diligence",
    "constraint_many_agents": "the constraint's weight is raised by this fraction in villages of more than 8 "
                              "NPCs",
    "shaping_scale": "state-entropy bonus factor of the reward shaping",
    "shaping_anneal": "joint steps (one tick of one village) over which the shaping weight falls from 1 to 0",
    "sync_threshold": "KL(agent || population) above which the sync check pulls an agent back",
    "sync_boost": "constraint-weight multiplier for agents over the sync threshold",
    "sync_probe": "probe states on which the sync check computes its KL matrix",
    "monitor_window": "epochs in the stability monitor's oscillation window",
    "monitor_warmup": "epochs before the stability monitor judges any",
    "oscillation_max": "an epoch is bad when std(returns) / |mean(returns)| over the window exceeds this",
    "cooperation_min": "an epoch is bad when cooperation efficiency falls below this (with cooperation in "
                       "--rollback-on)",
    "conflict_min": "an epoch is bad when the gradient-conflict ratio falls below this (with conflict in "
                    "--rollback-on)",
    "drawdown_max": "an epoch is bad when the return curve has lost more than this fraction of its progress",
    "bad_epochs": "bad epochs in a row that trigger a rollback to the last good checkpoint",
    "rollback_lr": "after a rollback the learning rate is multiplied by this",
    "rollback_constraint": "after a rollback the constraint's weight is multiplied by this",
    "rollback_explore": "after a rollback the entropy bonus is multiplied by this (1.1 = 10 percent more exploration)",
    "replay_episodes": "qmix/maddpg: episodes the replay holds (allocated for at most the episodes the run "
                       "collects)",
    "batch_episodes": "qmix/maddpg: episodes sampled per gradient step",
    "updates_per_episode": "qmix/maddpg: gradient steps per collected episode",
    "q_lr": "qmix/maddpg: Adam learning rate",
    "q_grad_clip": "qmix/maddpg: gradient-norm clip",
    "target_update": "qmix: gradient steps between hard copies to the target networks (at most a twentieth of "
                     "the run's gradient steps)",
    "target_tau": "maddpg: soft target-network update rate per gradient step",
    "epsilon_start": "qmix: exploration rate at the start (epsilon-greedy over valid actions)",
    "epsilon_finish": "qmix: exploration rate after the anneal",
    "epsilon_anneal": "qmix: joint steps (ticks of one env) of the linear anneal (at most half the run's)",
    "mixer_embed": "qmix: width of the mixing network",
    "hypernet_hidden": "qmix: hidden width of the hypernetworks on the global state",
    "double_q": "qmix: the online network picks the next action, the target network values it",
    "td_lambda": "qmix: 0 = one-step TD targets, > 0 = TD(lambda) over the episode",
    "gumbel_temperature": "maddpg: temperature of the straight-through Gumbel-softmax",
    "actor_reg": "maddpg: weight of the actor's squared-logit penalty",
}


def add_ray_arguments(parser: argparse.ArgumentParser, ray_help: str, workers_help: str) -> None:
    """--ray [ADDRESS] and --workers K (village train and village eval)."""
    parser.add_argument("--ray", nargs="?", const="local", default=None, metavar="local|auto|ADDRESS",
                        help=ray_help + " (default without a value: local)")
    parser.add_argument("--workers", type=int, default=None, metavar="K", help=workers_help)


def ray_options(args: argparse.Namespace) -> Any:
    """RayOptions from --ray/--workers/--envs-per-worker, with Ray connected (None without --ray)."""
    envs_per_worker = getattr(args, "envs_per_worker", None)
    if args.ray is None:
        for flag, value in (("--workers", args.workers), ("--envs-per-worker", envs_per_worker)):
            if value is not None:
                raise UserError(f"{flag}: needs --ray (rollout workers run on Ray)")
        return None
    from npc_brains.config import ConfigError
    from npc_brains.distributed import RayOptions, connect

    options = RayOptions(address=args.ray, workers=2 if args.workers is None else args.workers,
                         envs_per_worker=envs_per_worker)
    try:
        options.check()
        connect(options.address)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    return options


def _flag_type(annotation: Any) -> Any:
    text = str(annotation)
    if "bool" in text:
        return bool
    if "int" in text:
        return int
    if "float" in text:
        return float
    return str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from npc_brains.config import COMPONENTS, TrainConfig

    parser.add_argument("--config", metavar="FILE", help="TOML file with any of the options below (same keys)")
    parser.add_argument("--recipe", metavar="POLICY",
                        help="train as POLICY was trained (default, mappo or a policy file): its recorded "
                             "hyperparameters, components, worlds, steps and engine tuning become this run's "
                             "defaults, under --config and the flags; the run's own choices (--run-dir, "
                             "--init-from, --seed, --device, --threads, --collector, --checkpoint-every) are not "
                             "taken. `--recipe default --init-from default` fine-tunes the bundled policy with the "
                             "command of its last stage")
    parser.add_argument("--resume", nargs="?", const="auto", metavar="CHECKPOINT",
                        help="continue a run: its checkpoints/last.pt (default) or the given checkpoint")
    parser.add_argument("--overwrite", action="store_true", help="start afresh even if --run-dir holds a run")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_ray_arguments(parser, "collect with rollout-worker actors on Ray (the [distributed] extra; "
                              "docs/distributed.md): local starts Ray on this machine, auto joins the cluster this "
                              "node belongs to (`ray start`), HOST:PORT a head's address",
                      "rollout workers, each a vectorised env and a CPU copy of the policy (default: 2)")
    parser.add_argument("--envs-per-worker", type=int, default=None, metavar="E",
                        help="villages (or --env copies) each worker steps (default: the run's --envs shared out "
                             "among the workers, so a batch keeps its size)")
    parser.add_argument("--dashboard", action="store_true",
                        help="live terminal dashboard instead of the progress bar: the seed's three health "
                             "indicators against their thresholds, sparklines of return, entropy and KL, rollbacks "
                             "and diagnose warnings as they happen (needs rich: pip install 'village-npc[dashboard]'; "
                             "without a terminal it falls back to the plain progress bar)")
    main = parser.add_argument_group("run")
    tuning = parser.add_argument_group("hyperparameters and Dr. MAS components (see docs/training.md)")
    main_names = ("world", "env", "algo", "steps", "envs", "device", "seed", "init_from", "run_dir",
                  "checkpoint_every")
    for f in fields(TrainConfig):
        group = main if f.name in main_names else tuning
        flag = "--" + f.name.replace("_", "-")
        kind = _flag_type(f.type)
        help_text = HELP.get(f.name, "")
        default = f.default
        if f.name in COMPONENTS:
            shown = "per --algo"
        elif default is None:
            shown = "none"
        else:
            shown = ",".join(default) if isinstance(default, tuple) else default
        help_text = f"{help_text} (default: {shown})" if help_text else f"default: {shown}"
        if f.name == "tuning":
            group.add_argument(flag, dest=f.name, action="append", default=None, metavar="FIELD=VALUE",
                               help="override an engine Tuning field for training (docs/engine.md), e.g. "
                                    "--tuning w_alive=1.0; repeatable (TOML: a [tuning] table)")
        elif kind is bool:
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        elif f.name == "rollback_on":
            group.add_argument(flag, dest=f.name, default=None, metavar="LIST", help=help_text)
        else:
            group.add_argument(flag, dest=f.name, type=kind, default=None, metavar=f.name.split("_")[-1].upper(),
                               help=help_text)


def _tuning_flags(items: list[str]) -> dict[str, Any]:
    """`--tuning FIELD=VALUE` flags as a mapping; values are TOML literals (1.0, 3, true)."""
    from npc_brains.config import toml_module

    tomllib = toml_module()
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--tuning: expected FIELD=VALUE, got {item!r}")
        try:
            out[name.strip()] = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            raise UserError(f"--tuning {name.strip()}: expected a number or true/false, got {text!r}") from None
    return out


def build_config(args: argparse.Namespace) -> tuple[Any, Path | None]:
    """(TrainConfig, checkpoint to resume or None) from defaults, checkpoint, TOML and flags."""
    from npc_brains.config import TrainConfig, config_from_dict, load_toml_config

    flags = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name, None) is not None}
    layered: dict[str, Any] = {}
    if args.recipe is not None:
        if args.resume is not None:
            raise UserError("--recipe: a resumed run keeps its own options; expected one of --recipe and --resume")
        from npc_brains.trainer import recipe_of

        layered.update(recipe_of(args.recipe))
    if args.config:
        table = load_toml_config(args.config)
        if isinstance(table.get("tuning"), dict):  # a config's [tuning] adds to the recipe's world
            table["tuning"] = {**layered.get("tuning", {}), **table["tuning"]}
        layered.update(table)
    if "tuning" in flags:
        layered["tuning"] = {**layered.get("tuning", {}), **_tuning_flags(flags.pop("tuning"))}
    layered.update(flags)
    resume: Path | None = None
    if args.resume is not None:
        from npc_brains.trainer import config_from_checkpoint

        if args.resume == "auto":
            run_dir = layered.get("run_dir", TrainConfig.run_dir)
            resume = Path(run_dir) / "checkpoints" / "last.pt"
            if not resume.is_file():
                raise UserError(f"--resume: nothing to resume in {run_dir} (no checkpoints/last.pt)")
        else:
            resume = Path(args.resume)
        cfg = config_from_checkpoint(resume, layered)
        return cfg, resume
    return config_from_dict(layered, source=args.config or "flags"), None


# What a run directory holds; any of them means a run is there (a finished run may have no checkpoint left).
RUN_FILES = ("metrics.jsonl", "policy.pt", "checkpoints")


def _existing_run(run_dir: Path) -> list[str]:
    """The files of an earlier run in `run_dir` (an empty checkpoints/ folder does not count)."""
    found = []
    for name in RUN_FILES:
        path = run_dir / name
        if path.is_dir():
            if any(path.iterdir()):
                found.append(f"{name}/")
        elif path.exists():
            found.append(name)
    return found


def _check_run_dir(run_dir: Path) -> None:
    """Create the run directory and prove it writable now, not after the first update's work."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=run_dir):
            pass
    except OSError as exc:
        raise UserError(f"--run-dir: cannot create or write {str(run_dir)!r}: {exc.strerror or exc}") from None


class _Terminate:
    """SIGTERM (what `docker stop` and systemd send) stops a run as Ctrl-C does: save, then exit 143."""

    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.received:  # a second SIGTERM while the checkpoint is being written: let the save finish
            return
        self.received = True
        raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    # A process started in the background by a non-interactive shell inherits SIGINT as ignored, and Python then
    # never raises KeyboardInterrupt. Ctrl-C (or `kill -INT`) must always save and stop a run.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    terminate = _Terminate()
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        return _run(args, terminate)
    previous_term = signal.signal(signal.SIGTERM, terminate)
    try:
        return _run(args, terminate)
    finally:
        signal.signal(signal.SIGTERM, previous_term)


def _run(args: argparse.Namespace, terminate: _Terminate) -> int:
    from npc_brains.checkpoint import CheckpointError
    from npc_brains.config import ConfigError

    try:
        cfg, resume = build_config(args)
        run_dir = Path(cfg.run_dir)
        found = _existing_run(run_dir) if resume is None and not args.overwrite else []
        if found:
            raise UserError(f"run-dir: {run_dir} already holds a run ({', '.join(found)}); pass --resume to "
                            "continue it, --overwrite to start afresh, or choose another --run-dir")
        _check_run_dir(run_dir)
        if resume is None and args.overwrite:
            (run_dir / "metrics.jsonl").unlink(missing_ok=True)
        ray = ray_options(args)
        from npc_brains.algorithms import make_trainer

        trainer = make_trainer(cfg, progress=not args.no_progress, resume=resume, ray=ray)
    except (ConfigError, CheckpointError) as exc:
        raise UserError(str(exc)) from None
    dashboard = _attach_diagnosis(trainer, args)
    c = trainer.cfg
    where = c.env if c.env else c.world
    if hasattr(trainer, "summary"):  # an off-policy learner describes its own schedule
        head = trainer.summary()
    else:
        head = (f"{c.algo} on {where}, {trainer.B} envs x {trainer.N} agents, {trainer.total_updates} updates of "
                f"{trainer.rows_per_update} NPC-steps ({c.epochs} epoch{'s' if c.epochs != 1 else ''} x "
                f"{c.minibatches} minibatches), device {trainer.device}, collector {trainer.collector_kind}"
                + (f" ({ray.workers} workers x {trainer.B // ray.workers} envs)" if ray is not None else ""))
    print(f"village train: {head}" + (f", resuming at step {trainer.global_step}" if resume else ""),
          file=sys.stderr)
    from npc_brains.trainer import RunWriteError

    start = time.perf_counter()
    try:
        result = trainer.train()
    except RunWriteError as exc:
        raise UserError(str(exc)) from None
    finally:
        if dashboard is not None:
            dashboard.close()
    wall = time.perf_counter() - start
    from npc_brains.diagnose import train_verdict

    ret = "n/a" if result.final_return is None else f"{result.final_return:.3f}"
    if result.interrupted:
        how = "terminated (SIGTERM)" if terminate.received else "interrupted"
        print(f"village train: {how} at step {trainer.global_step}; checkpoint saved in "
              f"{trainer.ckpt_dir}; continue with --resume", file=sys.stderr)
        print(f"village train: {train_verdict(c.run_dir)}", file=sys.stderr)
        return 143 if terminate.received else 130
    segment = (f"{result.steps} NPC-steps in this run, {wall:.1f}s" if resume else f"{wall:.1f}s")
    print(f"village train: done: step {trainer.global_step} ({segment}, {result.steps / max(wall, 1e-9):.0f} "
          f"steps/s), episode_return_mean {ret}, rollbacks {result.rollbacks}; "
          f"metrics {c.run_dir}/metrics.jsonl, policy {c.run_dir}/policy.pt", file=sys.stderr)
    print(f"village train: {train_verdict(c.run_dir)}", file=sys.stderr)
    return 0


def _attach_diagnosis(trainer: Any, args: argparse.Namespace) -> Any:
    """Live diagnosis on every metrics row (its indicators and check statuses go to TensorBoard) and, with
    --dashboard on a terminal, the dashboard in place of the progress bar; returns the dashboard or None."""
    from npc_brains.checkpoint import env_description
    from npc_brains.dashboard import Dashboard, LiveDiagnosis
    from npc_brains.metrics import read_metrics

    live = LiveDiagnosis(trainer.run_dir, trainer.cfg.to_dict(), env_description(trainer.env))
    metrics = Path(trainer.run_dir) / "metrics.jsonl"
    if trainer.global_step and metrics.is_file():  # a resumed run: its earlier rows count
        for row in read_metrics(metrics):
            if int(row.get("step", 0)) <= trainer.global_step:
                (live.run.events if "event" in row else live.run.rows).append(row)
    trainer.metrics_listeners.append(live)
    if not args.dashboard:
        return None
    if not sys.stderr.isatty():
        print("village train: --dashboard needs a terminal; showing the plain progress bar", file=sys.stderr)
        return None
    try:
        import rich  # noqa: F401
    except ImportError:
        print("village train: --dashboard needs rich (pip install 'village-npc[dashboard]'); showing the plain "
              "progress bar", file=sys.stderr)
        return None
    trainer.progress = False
    dashboard = Dashboard(live, trainer.total_updates * trainer.rows_per_update, f"village train: {trainer.cfg.algo}",
                          trainer.global_step)
    trainer.metrics_listeners.append(dashboard)
    return dashboard

