"""The run loop every trainer shares (the PPO family's Trainer, the replay learners' OffPolicyTrainer): the run
directory, metrics.jsonl rows and the collector's event rows, the checkpoint cadence, the progress bar, Ctrl-C
and SIGTERM (a KeyboardInterrupt: save, stop), a write that fails (save what still can be, one line), and the
Result.

    RunLoop.train() ─┬─ _open_collection()            the run's collector (a thread, a child process, Ray workers)
                     ├─ each update: _update_once()   collect, learn -> the metrics row (and progress-bar fields)
                     │     row + collector events -> metrics.jsonl; checkpoints/last.pt every checkpoint_every
                     │     updates and at the end (with policy.pt)
                     └─ _close_collection()           always, also after Ctrl-C or a failed write
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npc_brains.checkpoint import save_checkpoint
from npc_brains.metrics import MetricsWriter, truncate_metrics


class WriteFailed(Exception):
    """One of a run's files could not be written: where, and the system's reason."""

    def __init__(self, path: Path, exc: OSError):
        self.path = path
        reason = exc.strerror or str(exc) or type(exc).__name__
        super().__init__(f"cannot write {path}: {reason}")


class RunWriteError(Exception):
    """Training stopped because a write failed; the message also says what was saved afterwards."""


@dataclass
class Result:
    run_dir: Path
    steps: int
    updates: int
    seconds: float
    interrupted: bool
    final_return: float | None
    rollbacks: int = 0
    final_win_rate: float | None = None


class RunLoop:
    """Base of the trainers: train() around the trainer's own collection and update (the hooks below)."""

    cfg: Any
    run_dir: Path
    ckpt_dir: Path
    update: int
    global_step: int
    total_updates: int
    rows_per_update: int
    progress: bool
    tensorboard: bool
    metrics_listeners: list[Any]
    last_return: float | None
    last_win: float | None = None
    rollbacks: int = 0

    # ------------------------------------------------------------------ hooks
    def _state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def policy_payload(self) -> dict[str, Any]:
        raise NotImplementedError

    def _open_collection(self) -> Any:
        """Start this run's collector (before the metrics writer and the progress bar start their threads, so a
        forked child copies none); what it returns gives the collector's event rows (`events()`)."""
        raise NotImplementedError

    def _update_once(self, writer: MetricsWriter, start: float) -> tuple[dict[str, Any], dict[str, str]]:
        """One update (collect, learn), with self.update and self.global_step advanced; (its metrics row, extra
        progress-bar fields). `start`: the run's perf_counter at its first update."""
        raise NotImplementedError

    def _close_collection(self) -> None:
        """Stop the collector (its workers, threads or child process); called whatever ended the run."""
        raise NotImplementedError

    # ------------------------------------------------------------------ files
    def save(self, final: bool = False) -> Path:
        path = self._write(self.ckpt_dir / "last.pt", self._state_dict)
        if final:
            self._write(self.run_dir / "policy.pt", self.policy_payload)
        return path

    @staticmethod
    def _write(path: Path, payload: Callable[[], dict[str, Any]]) -> Path:
        try:
            return save_checkpoint(path, payload())
        except OSError as exc:
            raise WriteFailed(path, exc) from None

    def _salvage(self, failure: WriteFailed) -> str:
        """After a failed write, save what still can be (the checkpoint, then the policy) and say which."""
        saved, lost = [], []
        for path, payload in ((self.ckpt_dir / "last.pt", self._state_dict),
                              (self.run_dir / "policy.pt", self.policy_payload)):
            try:
                self._write(path, payload)
                saved.append(str(path))
            except WriteFailed:
                lost.append(str(path))
        outcome = (f"saved {' and '.join(saved)} at step {self.global_step}" if saved
                   else "nothing could be saved")
        if saved and lost:
            outcome += f" ({' and '.join(lost)} could not be written)"
        return f"{failure}; {outcome}"

    # ------------------------------------------------------------------ the loop
    def train(self) -> Result:
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        truncate_metrics(self.run_dir / "metrics.jsonl", self.global_step)
        rollouts = self._open_collection()
        try:
            writer = MetricsWriter(self.run_dir, tensorboard=self.tensorboard)
            writer.listeners.extend(self.metrics_listeners)
        except BaseException:
            self._close_collection()
            raise
        from tqdm import tqdm

        bar = tqdm(total=self.total_updates * self.rows_per_update, initial=self.global_step, unit="step",
                   unit_scale=True, dynamic_ncols=True, disable=not self.progress, desc=f"{cfg.algo}")
        start = time.perf_counter()
        start_step = self.global_step
        interrupted = False
        failure: WriteFailed | None = None  # a checkpoint or metrics write that failed (disk full, dir gone)
        try:
            while self.update < self.total_updates:
                row, postfix = self._update_once(writer, start)
                try:
                    writer.write(row)
                    for event in rollouts.events():  # a worker restarted, ...
                        writer.write({"step": self.global_step, "update": self.update, **event})
                except OSError as exc:
                    raise WriteFailed(writer.path, exc) from None
                if self.update % cfg.checkpoint_every == 0 or self.update == self.total_updates:
                    self.save(final=self.update == self.total_updates)
                bar.update(self.rows_per_update)
                bar.set_postfix(ret=f"{self.last_return:.2f}" if self.last_return is not None else "-", **postfix,
                                refresh=False)
        except KeyboardInterrupt:
            interrupted = True
            try:
                self.save(final=True)
            except WriteFailed as exc:
                failure = exc
        except WriteFailed as exc:
            failure = exc
        finally:
            self._close_collection()
            bar.close()
            writer.close()
        seconds = time.perf_counter() - start
        if failure is not None:
            raise RunWriteError(self._salvage(failure))
        return Result(self.run_dir, self.global_step - start_step, self.update, seconds, interrupted,
                      self.last_return, self.rollbacks, self.last_win)


__all__ = ["Result", "RunLoop", "RunWriteError", "WriteFailed"]
