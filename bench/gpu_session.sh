#!/usr/bin/env bash
# What we run on a lent GPU machine (16 CPU cores + one H200) in one call: the CUDA training-throughput
# figure, the bundled-policy training runs, and the IPPO/MAPPO/Dr. MAS comparison with its ablations,
# spread over the cores. Results land in $OUT (at most 8 files come back, so each group is tarred).
#   usage (device tool): bash bench/gpu_session.sh  [TRAIN_SECONDS]
set -uo pipefail
OUT=${OUT:-out/gpu}
mkdir -p "$OUT" runs/gpu
TRAIN_SECONDS=${1:-400}
DEVICE=${DEVICE:-cuda}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
PY=python3
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/machine.txt"
$PY -c "import torch, numpy, numba; print('torch', torch.__version__, 'numpy', numpy.__version__, 'numba', numba.__version__)" | tee -a "$OUT/machine.txt"
POOL=village-v1,generated:12:1,generated:12:2,generated:12:3,generated:12:4
STEPS=${STEPS:-16000000}

# 1. training throughput, CUDA then CPU, alone on the machine
if [ "$DEVICE" = cuda ]; then
  timeout 120 $PY bench/train_throughput.py --device cuda --json > "$OUT/train_throughput_cuda.txt" 2>&1
fi
[ "$DEVICE" = cuda ] || timeout 120 $PY bench/train_throughput.py --device cpu --json > "$OUT/train_throughput_cpu.txt" 2>&1

# 2. the bundled policy candidates (Dr. MAS and MAPPO) on a pool of worlds, stopped cleanly (SIGINT saves)
for algo in drmas mappo; do
  timeout -s INT "$TRAIN_SECONDS" $PY -m village train --world "$POOL" --algo "$algo" --steps "$STEPS" \
    --device "$DEVICE" --threads 2 --seed 0 --run-dir "runs/gpu/$algo" --no-progress --overwrite \
    > "runs/gpu/$algo.log" 2>&1 &
done

# 3. comparison and ablations, one process per algorithm or switched-off component, one thread each
CMP="--world village-v1 --steps ${CMP_STEPS:-1000000} --device cpu --set threads=1 --json"
for algo in ippo mappo drmas; do
  $PY bench/compare_algos.py $CMP --seeds 3 --algos "$algo" --no-ablation --out "runs/gpu/cmp-$algo" \
    > "runs/gpu/cmp-$algo.log" 2>&1 &
done
for variant in -agent_adv_norm -film -contrastive -constraint -shaping -sync_check -double_buffer -rollback; do
  $PY bench/compare_algos.py $CMP --seeds 2 --algos drmas --ablations="$variant" --out "runs/gpu/abl$variant" \
    > "runs/gpu/abl$variant.log" 2>&1 &
done
wait
tar czf "$OUT/policies.tgz" runs/gpu/drmas runs/gpu/mappo runs/gpu/*.log 2>/dev/null
tar czf "$OUT/compare.tgz" --exclude='*.pt' runs/gpu/cmp-* runs/gpu/abl* 2>/dev/null
ls -la "$OUT"
