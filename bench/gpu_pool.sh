#!/usr/bin/env bash
# What we run on a lent GPU machine (16 CPU cores + one H200) in one call for issue 19's item 4: the bundled
# command on a pool of village sizes (12, 24, 48 NPCs) from scratch with four times the steps (so as many
# gradient updates as the 12-NPC bundle gets), its MAPPO twin and a second seed, beside 16M-step fine-tunes of
# the bundled policies on the same pool. Each run is stopped cleanly at TRAIN_SECONDS (SIGINT saves
# checkpoints/last.pt and policy.pt, so an unfinished run resumes with `village train --resume`).
# Results land in $OUT as one tarball per run (at most 8 files come back).
#   usage (device tool): bash bench/gpu_pool.sh [TRAIN_SECONDS]
set -uo pipefail
OUT=${OUT:-out/gpu}
mkdir -p "$OUT" runs/gpu
TRAIN_SECONDS=${1:-500}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
if [ -d .whl ]; then  # packages the device image lacks (tomli_w), carried as wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
PY=python3
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
$PY -c "import torch, numpy, numba; print('torch', torch.__version__, 'numpy', numpy.__version__, 'numba', numba.__version__)" | tee -a "$OUT/machine.txt"

POOL=village-v1,generated:12:1,generated:24:1,generated:48:1
# the bundled command's flags (docs/training.md, "The bundled default policy"), world and steps aside
BUNDLE=(--epochs 4 --minibatches 4 --constraint-rows 1 --ent-coef 0.03 --ent-final-frac 0.33
  --tuning mourn_ticks=4 --tuning mourn_relief_linear=true --tuning mourn_relief=0.1
  --tuning curriculum_rampage=0.4 --tuning w_inform=50 --tuning inform_grief_damping=true
  --tuning flee_home=true --tuning hunt_nearest=true
  --tuning rampage_at_scene=true --tuning hunt_afraid=0.3 --tuning rampage_linger=0
  --tuning curriculum_armoured=0.3 --tuning grief_waits=true --tuning inform_threat_deaths=true
  --tuning death_penalty=60 --tuning refuge_out_of_sight=true --tuning avenger_not_feared=true
  --tuning hide_ticks=24 --tuning flee_margin=1.3 --tuning grief_dulls_pay=3.0
  --tuning hunt_afraid_only=true)

train() {  # name, then the run's own flags
  local name=$1; shift
  timeout -s INT "$TRAIN_SECONDS" $PY -m village train --world "$POOL" --device "${DEVICE:-cuda}" --threads 1 \
    --run-dir "runs/gpu/$name" --no-progress --overwrite "${BUNDLE[@]}" "$@" > "runs/gpu/$name.log" 2>&1
  echo "$name: exit $?" >> "runs/gpu/$name.log"
}
train ZP4 --algo drmas --seed 0 --steps 64000000 &
train ZP4m --algo mappo --seed 0 --steps 64000000 &
train ZP4s1 --algo drmas --seed 1 --steps 64000000 &
train FT3 --algo drmas --seed 0 --steps 16000000 --init-from default &
train FT3m --algo mappo --seed 0 --steps 16000000 --init-from mappo &
wait
for run in ZP4 ZP4m ZP4s1 FT3 FT3m; do
  tail -n 3 "runs/gpu/$run.log"
  tar czf "$OUT/$run.tgz" --exclude='tb' -C runs/gpu "$run" "$run.log" 2>/dev/null
done
ls -la "$OUT"
