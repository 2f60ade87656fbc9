#!/usr/bin/env bash
# The bare limit for bringup.py --compare: the least any launcher does to bring Ray up over a
# Slurm allocation and run a driver on it. Every node runs `ray start` at once (workers retry
# until the head's GCS port answers); the driver starts with the job and prints its first line
# once Ray shows every node. No bounded waits, readiness, failure handling, auth or log dir.
# Needs RAY_VENV (Ray's venv), DRIVER (the driver script) and BENCH_OUT (where its output goes);
# BARE_HEAD_ARGS: more `ray start --head` flags (--include-dashboard=false: the limit of issue 37,
# whose head starts its raylet at once, where a head with a dashboard waits for it first).
set -euo pipefail

mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head=${nodes[0]}
head_ip=$(getent ahostsv4 "$head" | awk '{ print $1; exit }')
port=6380
gpus=8
export RAY_ENABLE_UV_RUN_RUNTIME_ENV=0

srun --nodes=1 --ntasks=1 -w "$head" bash -c "
  source '$RAY_VENV/bin/activate'
  exec ray start --head --block --disable-usage-stats --node-ip-address='$head_ip' \
    --port=$port --num-gpus=$gpus ${BARE_HEAD_ARGS:-}" >"$BENCH_OUT/$SLURM_JOB_ID.head" 2>&1 &
if ((${#nodes[@]} > 1)); then
  workers=$(IFS=,; echo "${nodes[*]:1}")
  srun --nodes=$((${#nodes[@]} - 1)) --ntasks-per-node=1 -w "$workers" bash -c "
    source '$RAY_VENV/bin/activate'
    until (exec 3<>/dev/tcp/$head_ip/$port) 2>/dev/null; do sleep 0.1; done
    exec ray start --block --disable-usage-stats --address='$head_ip:$port' --num-gpus=$gpus" \
    >"$BENCH_OUT/$SLURM_JOB_ID.workers" 2>&1 &
fi

# The driver on the head node, from the start: it waits for the GCS, then for every node.
srun --overlap --nodes=1 --ntasks=1 -w "$head" bash -c "
  source '$RAY_VENV/bin/activate'
  until (exec 3<>/dev/tcp/$head_ip/$port) 2>/dev/null; do sleep 0.1; done
  export RAY_ADDRESS='$head_ip:$port'
  until python '$DRIVER' ${#nodes[@]}; do sleep 0.2; done" >"$BENCH_OUT/$SLURM_JOB_ID.driver" 2>&1

# Done: stop Ray on every node, then the steps.
srun --overlap --nodes=${#nodes[@]} --ntasks-per-node=1 bash -c \
  "source '$RAY_VENV/bin/activate' && ray stop --force" >/dev/null 2>&1 || true
mapfile -t steps < <(jobs -p)
kill "${steps[@]}" 2>/dev/null || true
wait || true
