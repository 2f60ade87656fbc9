# Model pools beside training (pools:): what every kind of job with pools shares. Each pool's
# replicas serve an OpenAI-compatible API (pools.<name>.command, or vLLM's server); the head step
# runs one balancer per pool (pool_balancer.py, from the log dir) and starts the driver once
# every required pool's replicas all answer, with each pool's placeholder in the driver's
# command replaced by its URL. Where the replicas run is the kind's (pools_slurm.sh: nodes of
# their own; pools_local.sh: processes on this machine). Values: the header's NRL_POOL_* and
# pool_server; each pool's backends come in NRL_POOL_BACKENDS_<index>.
NRL_BALANCER_PIDS=()
NRL_POOL_SERVER_PID=""

# The IPv4 address of node $1, as the nodes resolve it.
node_ip() {
  local ip
  ip=$(getent ahostsv4 "$1" | awk '{ print $1; exit }') || true
  printf '%s' "${ip:-$1}"
}

# Runs pool $1's server (NRL_POOL_SERVER, with NRL_POOL_PORT set) as replica $2 on node $3, in
# the driver's dir (the code frozen at submit, as the driver's), in a process group of its own;
# returns its exit code.
run_pool_server() {
  local workdir rc=0
  workdir=$(driver_workdir)
  log "pool $1 replica $2 on $3, in $workdir: ${NRL_POOL_SERVER[*]} (port $NRL_POOL_PORT)"
  cd -- "$workdir" || return
  snapshot_env
  if command -v setsid >/dev/null; then
    setsid "${NRL_POOL_SERVER[@]}" &
  else
    "${NRL_POOL_SERVER[@]}" &
  fi
  NRL_POOL_SERVER_PID=$!
  wait "$NRL_POOL_SERVER_PID" || rc=$?
  # What it started goes with it: a child left serving (uv's python, say) would keep answering
  # for a replica that is gone.
  kill -KILL -- "-$NRL_POOL_SERVER_PID" 2>/dev/null || true
  NRL_POOL_SERVER_PID=""
  log "pool $1 replica $2 on $3: the server exited with code $rc"
  return "$rc"
}

# Stops the replica's server and everything it started (its process group), SIGTERM first.
stop_pool_server() {
  local pid=${NRL_POOL_SERVER_PID:-}
  if [[ -n $pid ]]; then
    NRL_POOL_SERVER_PID=""
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    # Within Slurm's KillWait (often 30 s, 5 on the dev cluster), then the rest of its group:
    # past it, this shell is killed and the server, a session of its own, would outlive it.
    wait_bounded "$pid" 3 || true
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  [[ -z ${NRL_RAY_PID:-} ]] || stop_ray
}

# ---- On the head node (the head step) ----
# One balancer per pool, in the background, each in a process group of its own
# (NRL_BALANCER_PIDS): pool-<name>-balancer.log, and its state in pool-<name>.json.
start_balancers() {
  local i p python
  python=$(command -v python3 || true)
  if [[ -z $python ]]; then
    end_job "the pools' balancers need python3 on the head node ($NRL_HEAD_NODE), in the job's container"
    return 1
  fi
  NRL_BALANCER_PIDS=()
  # However the head ends: a balancer in a session of its own outlives it otherwise (Slurm's
  # linuxproc tracking loses an orphan), and holds its port against the next job.
  trap stop_balancers EXIT
  for i in "${!NRL_POOLS[@]}"; do
    p=${NRL_POOLS[i]}
    local backends=()
    read -r -a backends <<<"$(printenv "NRL_POOL_BACKENDS_$i")"
    if listening "$NRL_HEAD_IP" "${NRL_POOL_BALANCER_PORTS[i]}"; then
      end_job "pool $p: port ${NRL_POOL_BALANCER_PORTS[i]} (pools.$p.balancer_port) is already in use on $NRL_HEAD_NODE"
      return 1
    fi
    setsid "$python" "$NRL_LOG_DIR/pool_balancer.py" --pool "$p" \
      --listen "$NRL_HEAD_IP:${NRL_POOL_BALANCER_PORTS[i]}" \
      "${backends[@]/#/--backend=}" --health-path "${NRL_POOL_HEALTH_PATHS[i]}" \
      --state "$NRL_LOG_DIR/pool-$p.json" >>"$NRL_LOG_DIR/pool-$p-balancer.log" 2>&1 &
    NRL_BALANCER_PIDS+=("$!")
    printf 'http://%s:%s/v1\n' "$NRL_HEAD_IP" "${NRL_POOL_BALANCER_PORTS[i]}" >"$NRL_LOG_DIR/${p}_url"
  done
}

stop_balancers() {
  local pid
  for pid in "${NRL_BALANCER_PIDS[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  done
  NRL_BALANCER_PIDS=()
}

# How many of pool $1's replicas its balancer finds healthy, from its state file (none: 0).
pool_healthy() {
  local state
  state=$(cat -- "$NRL_LOG_DIR/pool-$1.json" 2>/dev/null) || { printf 0; return; }
  [[ $state =~ \"healthy\":\ *([0-9]+) ]] && printf '%s' "${BASH_REMATCH[1]}" || printf 0
}

# Before the driver: waits until every replica of every required pool answers (each within its
# startup_timeout_s of the job's start), then puts each pool's URL in the driver's command.
wait_for_pools() {
  local i p healthy waiting started now url k
  started=$(awk '$1 == "started" { print int($2); exit }' "$NRL_LOG_DIR/timeline")
  log "waiting for the required pools to answer: ${NRL_POOLS[*]}"
  while true; do
    waiting=""
    now=$(date +%s)
    for i in "${!NRL_POOLS[@]}"; do
      ((NRL_POOL_REQUIRED[i])) || continue
      p=${NRL_POOLS[i]}
      healthy=$(pool_healthy "$p")
      ((healthy >= NRL_POOL_SIZES[i])) && continue
      if ((now - ${started:-now} >= NRL_POOL_STARTUP_TIMEOUTS[i])); then
        end_job "pool $p: $healthy of ${NRL_POOL_SIZES[i]} replica(s) answered within ${NRL_POOL_STARTUP_TIMEOUTS[i]} s (pools.$p.startup_timeout_s); see pool-$p-*.log"
        return 1
      fi
      waiting+=" $p ($healthy/${NRL_POOL_SIZES[i]})"
    done
    [[ -n $waiting ]] || break
    [[ ! -e $NRL_LOG_DIR/ENDED ]] || return 1
    sleep 1
  done
  phase pools_ready
  for i in "${!NRL_POOLS[@]}"; do
    url="http://$NRL_HEAD_IP:${NRL_POOL_BALANCER_PORTS[i]}/v1"
    for k in "${!NRL_DRIVER[@]}"; do
      NRL_DRIVER[k]=${NRL_DRIVER[k]//"${NRL_POOL_PLACEHOLDERS[i]}"/$url}
    done
    log "pool ${NRL_POOLS[i]}: $url (replaces ${NRL_POOL_PLACEHOLDERS[i]})"
  done
}
