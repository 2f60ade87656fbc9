# Model pools on this machine (the local backend): each replica is a process here, on the pool's
# port plus its index (pools.<name>.port + K), started before the head; a watcher ends the job
# when a required pool has no replica left, as on Slurm.
NRL_LOCAL_POOL_PIDS=()
NRL_LOCAL_POOL_NAMES=()
NRL_POOL_WATCH_PID=""

# Starts every replica (pool-<name>-<K>.log) and exports each pool's backends for the head's
# balancers; then the watcher.
start_local_pools() {
  local i r p backends
  pool_balancer_source >"$NRL_LOG_DIR/pool_balancer.py"
  for i in "${!NRL_POOLS[@]}"; do
    p=${NRL_POOLS[i]} backends=""
    for ((r = 0; r < NRL_POOL_SIZES[i]; r++)); do
      backends+="${backends:+ }127.0.0.1:$((NRL_POOL_SERVER_PORTS[i] + r))"
      local_pool_replica "$i" "$r" >>"$NRL_LOG_DIR/pool-$p-$r.log" 2>&1 &
      NRL_LOCAL_POOL_PIDS+=("$!")
      NRL_LOCAL_POOL_NAMES+=("$i $r")
    done
    export "NRL_POOL_BACKENDS_$i=$backends"
    log "pool $p: ${NRL_POOL_SIZES[i]} replica(s) starting on $backends"
  done
  watch_local_pools &
  NRL_POOL_WATCH_PID=$!
}

# One replica, in a subshell: the job's environment, the pool's, then its server.
local_pool_replica() {
  local p=${NRL_POOLS[$1]}
  trap 'stop_pool_server; exit 143' TERM
  enter_job_env || { log "pool $p replica $2: the setup command failed"; exit 1; }
  pool_server "$p"
  export NRL_POOL_NAME=$p NRL_POOL_REPLICA=$2 NRL_POOL_PORT=$((NRL_POOL_SERVER_PORTS[$1] + $2))
  if listening 127.0.0.1 "$NRL_POOL_PORT"; then
    log "pool $p replica $2: port $NRL_POOL_PORT is already in use on this machine"
    exit 1
  fi
  run_pool_server "$p" "$2" "$(hostname)"
}

# Every second until the job ends: a replica that exited is said once; a required pool with none
# left ends the job, naming it; an optional one is a warning.
watch_local_pools() {
  local k i r p left
  local -A said=() gone=()
  while [[ ! -e $NRL_LOG_DIR/ENDED ]]; do
    for k in "${!NRL_LOCAL_POOL_PIDS[@]}"; do
      [[ -z ${said[$k]:-} ]] || continue
      kill -0 "${NRL_LOCAL_POOL_PIDS[k]}" 2>/dev/null && continue
      said[$k]=1
      read -r i r <<<"${NRL_LOCAL_POOL_NAMES[k]}"
      log "pool ${NRL_POOLS[i]}: replica $r exited; see pool-${NRL_POOLS[i]}-$r.log"
    done
    for i in "${!NRL_POOLS[@]}"; do
      p=${NRL_POOLS[i]} left=0
      [[ -z ${gone[$p]:-} ]] || continue
      for k in "${!NRL_LOCAL_POOL_NAMES[@]}"; do
        [[ ${NRL_LOCAL_POOL_NAMES[k]} == "$i "* && -z ${said[$k]:-} ]] && left=$((left + 1))
      done
      ((left == 0)) || continue
      gone[$p]=1
      : >"$NRL_LOG_DIR/pool-$p.gone"
      if ((NRL_POOL_REQUIRED[i])); then
        end_job "pool $p: every replica has exited (a required pool); see pool-$p-*.log"
        return 0
      fi
      log "warning: pool $p: every replica has exited (an optional pool): the job goes on without it"
    done
    sleep 1
  done
}

# At the job's end: every replica and the watcher.
stop_local_pools() {
  local pid
  for pid in "${NRL_LOCAL_POOL_PIDS[@]}" ${NRL_POOL_WATCH_PID:+"$NRL_POOL_WATCH_PID"}; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${NRL_LOCAL_POOL_PIDS[@]}"; do
    wait_bounded "$pid" 30 || true
  done
  NRL_LOCAL_POOL_PIDS=()
}
