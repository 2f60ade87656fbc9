# Model pools on Slurm: the job is heterogeneous. Its first component is the training cluster
# (Ray, the driver), its second the pools' nodes, cut into one slice per replica in the order of
# NRL_POOLS. The batch step starts every replica's step while Ray comes up; a replica that exits
# is routed around by its balancer, and a required pool whose replicas have all exited ends the
# job, naming it.
NRL_POOL_STEP_PIDS=()
NRL_POOL_STEP_NAMES=()

# Batch step: starts every replica's step (NRL_POOL_STEP_PIDS; its output is
# pool-<name>-<K>.log) and exports each pool's backends (NRL_POOL_BACKENDS_<index>) for the head
# step's balancers. Writes node-allocation.txt, as NeMo RL's wrapper does.
start_pools() {
  local nodes=() slice=() i r p per first=0 ip backends
  mapfile -t nodes < <(scontrol show hostnames "${SLURM_JOB_NODELIST_HET_GROUP_1:-}")
  if [[ -z ${nodes[*]-} ]]; then
    end_job "the job has no second component for its pools (SLURM_JOB_NODELIST_HET_GROUP_1 is empty): was job.sbatch submitted with its #SBATCH hetjob lines?"
    return 1
  fi
  pool_balancer_source >"$NRL_LOG_DIR/pool_balancer.py"
  printf 'training: %s\n' "$NRL_NODE_LIST" >"$NRL_LOG_DIR/node-allocation.txt"
  for i in "${!NRL_POOLS[@]}"; do
    p=${NRL_POOLS[i]} per=${NRL_POOL_NODES_PER_REPLICA[i]} backends=""
    for ((r = 0; r < NRL_POOL_SIZES[i]; r++)); do
      slice=("${nodes[@]:first:per}")
      first=$((first + per))
      if [[ -z ${slice[per - 1]-} ]]; then
        end_job "pool $p: replica $r needs $per node(s), but the pools' component has only $(wc -w <<<"${nodes[*]}")"
        return 1
      fi
      ip=$(node_ip "${slice[0]}")
      backends+="${backends:+ }$ip:${NRL_POOL_SERVER_PORTS[i]}"
      printf 'pool %s replica %s: %s\n' "$p" "$r" "${slice[*]}" >>"$NRL_LOG_DIR/node-allocation.txt"
      # A container of its own, named so that attach can enter it (never kept: removed at the
      # job's end with the others).
      NRL_CONTAINER_IMAGE=${NRL_POOL_IMAGES[i]:-${NRL_CONTAINER_IMAGE:-}} NRL_CONTAINER_REUSE=0 \
        set_container_args "$(pool_container "$p" "$r")"
      # Its own step on its own nodes (the second component): its exit is this replica's.
      srun --het-group=1 "${NRL_STEP_ARGS[@]}" "${NRL_CONTAINER_ARGS[@]}" --nodes="$per" \
        --ntasks="$per" -w "$(IFS=,; printf '%s' "${slice[*]}")" --kill-on-bad-exit=1 \
        --output="${NRL_LOG_DIR//%/%%}/pool-$p-$r.log" \
        bash "$NRL_LOG_DIR/job.sbatch" pool-replica "$i" "$r" &
      NRL_POOL_STEP_PIDS+=("$!")
      NRL_POOL_STEP_NAMES+=("$i $r")
    done
    export "NRL_POOL_BACKENDS_$i=$backends"
    log "pool $p: ${NRL_POOL_SIZES[i]} replica(s) starting on $backends"
  done
}

# The name of replica $2 of pool $1's container (pyxis).
pool_container() { printf '%s' "${NRL_CONTAINER_NAME:-nrl-$NRL_RUN_NAME}-pool-$1-$2"; }

# The pools' nodes, all of them (the job's second component), comma-separated.
pool_nodes() { sed -n 's/^pool [^ ]* replica [0-9]*: //p' "$NRL_LOG_DIR/node-allocation.txt" | tr ' \n' ',,' | sed 's/,*$//'; }

# attach to pool $1's replica $2: a shell or one command on its first node, in its container.
attach_pool() {
  local p=$1 r=$2 shell=$3 node pty=()
  shift 3
  node=$(sed -n "s/^pool $p replica $r: \([^ ]*\).*/\1/p" "$NRL_LOG_DIR/node-allocation.txt" 2>/dev/null)
  if [[ -z $node ]]; then
    echo "attach: no replica $r of a pool $p in job $NRL_ATTACH_JOB (see node-allocation.txt in its log dir)" >&2
    exit 2
  fi
  ((shell == 0)) || pty=(--pty)
  set_container_args "$(pool_container "$p" "$r")" attach
  exec srun --overlap --jobid="$NRL_ATTACH_JOB" --het-group=1 --nodes=1 --ntasks=1 -w "$node" \
    "${NRL_CONTAINER_ARGS[@]}" "${pty[@]}" bash "$NRL_LOG_DIR/job.sbatch" attach-node "$@"
}

# Batch step, after first_to_end: whether the job goes on (0) because what ended was only a
# replica step and its pool can do without it. A required pool with no replica left ends the
# job, naming it; an optional one is a warning.
pool_step_ended() {
  local k i r p alive=() names=() left
  [[ ! -e $NRL_LOG_DIR/ENDED ]] || return 1
  for k in "${!NRL_POOL_STEP_PIDS[@]}"; do
    if kill -0 "${NRL_POOL_STEP_PIDS[k]}" 2>/dev/null; then
      alive+=("${NRL_POOL_STEP_PIDS[k]}")
      names+=("${NRL_POOL_STEP_NAMES[k]}")
      continue
    fi
    read -r i r <<<"${NRL_POOL_STEP_NAMES[k]}"
    p=${NRL_POOLS[i]}
    log "pool $p: replica $r exited; see pool-$p-$r.log"
    printf 'pool_replica_exited:%s-%s %s\n' "$p" "$r" "$(date +%s.%N)" >>"$NRL_LOG_DIR/timeline"
  done
  NRL_POOL_STEP_PIDS=("${alive[@]}")
  NRL_POOL_STEP_NAMES=("${names[@]}")
  for i in "${!NRL_POOLS[@]}"; do
    p=${NRL_POOLS[i]}
    left=$(printf '%s\n' "${NRL_POOL_STEP_NAMES[@]}" | grep -c "^$i " || true)
    ((left == 0)) || continue
    [[ ! -e $NRL_LOG_DIR/pool-$p.gone ]] || continue
    : >"$NRL_LOG_DIR/pool-$p.gone"
    if ((NRL_POOL_REQUIRED[i])); then
      end_job "pool $p: every replica has exited (a required pool); see pool-$p-*.log"
      log "pool $p: every replica has exited: stopping the job"
      return 1
    fi
    log "warning: pool $p: every replica has exited (an optional pool): the job goes on without it"
  done
  # The head, a worker or the sandbox may have ended at the same time.
  return 0
}

# Batch step, at the job's end: each replica's step is stopped through srun.
stop_pool_steps() {
  local pid
  for pid in "${NRL_POOL_STEP_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${NRL_POOL_STEP_PIDS[@]}"; do
    wait_bounded "$pid" 30 || true
  done
  NRL_POOL_STEP_PIDS=()
}

# ---- In a replica's step, on each of its nodes ----
# Its first node runs the pool's server; a replica of several nodes also runs a Ray cluster of
# its own across them (the server's --distributed-executor-backend ray), with the job's ports.
pool_replica_main() {
  local i=$1 r=$2 p rc=0 node
  p=${NRL_POOLS[i]}
  NRL_RAY_PID="" NRL_POOL_SERVER_PID=""
  node=${SLURMD_NODENAME:-$(hostname)}
  trap 'stop_pool_server; exit 143' TERM
  enter_job_env || { log "pool $p replica $r on $node: the setup command failed"; exit 1; }
  pool_server "$p"
  export NRL_POOL_NAME=$p NRL_POOL_REPLICA=$r NRL_POOL_PORT=${NRL_POOL_SERVER_PORTS[i]}
  if ((${SLURM_PROCID:-0} > 0)); then
    pool_ray_worker "$i" "$r"
    exit $?
  fi
  if listening 127.0.0.1 "$NRL_POOL_PORT"; then
    log "pool $p replica $r on $node: port $NRL_POOL_PORT is already in use (another job's server?)"
    exit 1
  fi
  if ((NRL_POOL_NODES_PER_REPLICA[i] > 1)); then
    pool_ray_head "$i" "$r" || exit 1
  fi
  run_pool_server "$p" "$r" "$node" || rc=$?
  stop_ray
  exit "$rc"
}

# A multi-node replica's own Ray head, on its first node: the job's Ray ports (these nodes run
# no other Ray of the job's) and its token.
pool_ray_head() {
  local ip
  ip=$(node_ip "${SLURMD_NODENAME:-$(hostname)}")
  log "pool ${NRL_POOLS[$1]} replica $2: a Ray cluster of its own on $ip:$NRL_GCS_PORT"
  setsid ray start --head --block --disable-usage-stats --node-ip-address="$ip" \
    --port="$NRL_GCS_PORT" --ray-client-server-port="$NRL_RAY_CLIENT_SERVER_PORT" \
    --include-dashboard=false "${NRL_RAY_PORTS[@]}" \
    --num-gpus="${SLURM_GPUS_ON_NODE:-$NRL_GPUS_PER_NODE}" &
  NRL_RAY_PID=$!
  local deadline=$((SECONDS + NRL_HEAD_START_TIMEOUT))
  until listening "$ip" "$NRL_GCS_PORT"; do
    if ! kill -0 "$NRL_RAY_PID" 2>/dev/null || ((SECONDS >= deadline)); then
      log "pool ${NRL_POOLS[$1]} replica $2: its Ray head did not start"
      return 1
    fi
    nap 0.1
  done
  export RAY_ADDRESS="$ip:$NRL_GCS_PORT"
  # Then every node of the replica: each `ray start` says "Ray runtime started." in the
  # replica's log (the step's output, all its nodes') once the GCS lists its node.
  local need=${NRL_POOL_NODES_PER_REPLICA[$1]} joined
  local out="$NRL_LOG_DIR/pool-${NRL_POOLS[$1]}-$2.log"
  deadline=$((SECONDS + NRL_JOIN_TIMEOUT))
  while true; do
    joined=$(grep -c 'Ray runtime started' "$out" 2>/dev/null || true)
    ((${joined:-0} < need)) || return 0
    if ((SECONDS >= deadline)); then
      log "pool ${NRL_POOLS[$1]} replica $2: ${joined:-0} of its $need nodes joined its Ray within ${NRL_JOIN_TIMEOUT}s"
      return 1
    fi
    sleep 1
  done
}

# The other nodes of a multi-node replica: a Ray worker that joins its first node's head.
pool_ray_worker() {
  local head ip deadline=$((SECONDS + NRL_HEAD_START_TIMEOUT))
  head=$(scontrol show hostnames "$SLURM_STEP_NODELIST" | head -n 1)
  ip=$(node_ip "$head")
  until listening "$ip" "$NRL_GCS_PORT"; do
    ((SECONDS < deadline)) || { log "pool ${NRL_POOLS[$1]} replica $2: no Ray head on $ip"; return 1; }
    sleep 1
  done
  setsid ray start --block --disable-usage-stats --address="$ip:$NRL_GCS_PORT" \
    --node-ip-address="$(node_ip "${SLURMD_NODENAME:-$(hostname)}")" "${NRL_RAY_PORTS[@]}" \
    --num-gpus="${SLURM_GPUS_ON_NODE:-$NRL_GPUS_PER_NODE}" &
  NRL_RAY_PID=$!
  wait "$NRL_RAY_PID"
}
