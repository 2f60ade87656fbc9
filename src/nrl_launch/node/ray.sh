# One node's part: Ray head (and the driver) or a worker, and what an attach step runs.
# Needs NRL_LOG_DIR, NRL_HEAD_NODE, NRL_HEAD_IP, NRL_NODE_LIST and NRL_SUBMIT_DIR from the
# script that starts it, and NRL_DASHBOARD_HOST from the script that includes it.
# ---- Node steps: `head` on node 0, `worker` on the others ----
NRL_RAY_PORTS=(
  --node-manager-port="$NRL_NODE_MANAGER_PORT"
  --object-manager-port="$NRL_OBJECT_MANAGER_PORT"
  --runtime-env-agent-port="$NRL_RUNTIME_ENV_AGENT_PORT"
  --dashboard-agent-grpc-port="$NRL_DASHBOARD_AGENT_GRPC_PORT"
  --dashboard-agent-listen-port="$NRL_DASHBOARD_AGENT_LISTEN_PORT"
  --metrics-export-port="$NRL_METRICS_EXPORT_PORT"
  --min-worker-port="$NRL_MIN_WORKER_PORT"
  --max-worker-port="$NRL_MAX_WORKER_PORT"
)
# The head's fixed ports, by their key in the job spec: each must be free before Ray starts.
NRL_HEAD_PORTS=(
  "ray.ports.gcs=$NRL_GCS_PORT"
  "ray.ports.client_server=$NRL_RAY_CLIENT_SERVER_PORT"
  "ray.ports.dashboard=$NRL_DASHBOARD_PORT"
  "ray.ports.node_manager=$NRL_NODE_MANAGER_PORT"
  "ray.ports.object_manager=$NRL_OBJECT_MANAGER_PORT"
  "ray.ports.runtime_env_agent=$NRL_RUNTIME_ENV_AGENT_PORT"
  "ray.ports.dashboard_agent_grpc=$NRL_DASHBOARD_AGENT_GRPC_PORT"
  "ray.ports.dashboard_agent_listen=$NRL_DASHBOARD_AGENT_LISTEN_PORT"
  "ray.ports.metrics_export=$NRL_METRICS_EXPORT_PORT"
)
# ray.external_debugger (ray.sub's RAY_DEBUG=legacy): a breakpoint on any node listens on that
# node's address, so `ray debug` from `nrl-launch attach` reaches it.
NRL_RAY_ARGS=()
if ((NRL_RAY_DEBUGGER_EXTERNAL)); then NRL_RAY_ARGS=(--ray-debugger-external); fi
# ray.dashboard false: the head starts no dashboard (its own raylet then starts at once).
NRL_HEAD_ARGS=()
if ((!NRL_RAY_DASHBOARD)); then NRL_HEAD_ARGS=(--include-dashboard=false); fi
NRL_RAY_PID=""
NRL_DRIVER_PID=""

# Ray runs with --block as a child of this step and in a process group of its own (setsid):
# SIGTERM to `ray start` stops Ray, but the raylet's agents linger up to a minute after it,
# orphaned on the node, where Slurm's process tracking (by parentage, or by process group with
# proctrack/pgid) no longer finds them. Ending Ray's group ends them.
stop_ray() {
  local pid=$NRL_RAY_PID
  [[ -n $pid ]] || return 0
  NRL_RAY_PID=""
  log "stopping Ray"
  kill -TERM "$pid" 2>/dev/null || true
  wait_bounded "$pid" 40 || true
  kill -KILL -- "-$pid" 2>/dev/null || true
}

# Stops the driver: SIGTERM, then up to $1 seconds (default 10) before SIGKILL. Returns the
# driver's exit status.
stop_driver() {
  local pid rc=0
  pid=$NRL_DRIVER_PID
  [[ -n $pid ]] || return 0
  NRL_DRIVER_PID=""
  kill -TERM "$pid" 2>/dev/null || true
  wait_bounded "$pid" "${1:-10}" || rc=$?
  return "$rc"
}

node_main() {
  local role=$1 index=0 node
  # Lepton's workers are named by the job script; Slurm names its nodes.
  NRL_NODE_NAME=${NRL_NODE_NAME:-${SLURMD_NODENAME:-$(hostname)}}
  for node in $NRL_NODE_LIST; do
    [[ $node == "$NRL_NODE_NAME" ]] && break
    index=$((index + 1))
  done
  NRL_NODE_INDEX=$index
  NRL_NODE_LOG=$NRL_LOG_DIR/ray-worker-$index.log
  [[ $role != head ]] || NRL_NODE_LOG=$NRL_LOG_DIR/ray-head.log
  exec >>"$NRL_NODE_LOG" 2>&1
  log "$role on $NRL_NODE_NAME (node $index of $NRL_NODES)"
  [[ $role != head ]] || phase head_step
  # container.reuse: this node's container is whole (pyxis made it; the step runs in it).
  [[ ${NRL_CONTAINER_REUSE:-0} == 0 ]] || : >"$NRL_LOG_DIR/container-up.$NRL_NODE_NAME"
  # ENDED first: Slurm's SIGKILL may come before Ray has stopped.
  trap 'end_job "${NRL_SCHEDULER:-Slurm} stopped node $NRL_NODE_NAME (job cancelled, time limit, requeue or preemption)"; stop_driver || true; stop_ray; exit 143' TERM
  # Ray stops only when the job is over: there is nothing to drain work to (Ray >= 2.5x
  # otherwise waits up to 30 s on SIGTERM). A value in the job's env still wins.
  export RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=${RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S:-0}
  [[ -z $NRL_SETUP ]] || log "running the setup command"
  enter_job_env || { end_job "the setup command failed on node $index ($NRL_NODE_NAME)"; exit 1; }
  command -v ray >/dev/null || { end_job "ray is not on PATH on node $index ($NRL_NODE_NAME)"; exit 1; }
  local secret
  if secret=$(missing_secret); then
    end_job "the secret $secret is not in the job's environment on node $index ($NRL_NODE_NAME)"
    exit 1
  fi
  [[ $role != head ]] || has_ray_auth || exit 1

  # Ray cannot detect GPUs on every site: declare what the scheduler allocated.
  NRL_NODE_GPUS=${NRL_NODE_GPUS:-${SLURM_GPUS_ON_NODE:-$NRL_GPUS_PER_NODE}}
  NRL_NODE_CPUS=${NRL_CPUS_PER_NODE:-${SLURM_CPUS_ON_NODE:-$(nproc)}}
  gcs_headroom
  # What NeMo RL's placement reads about this node, and its GPU -> CPU map at one path on every
  # node (the driver hands its environment to every actor): in Ray's own node-local temp dir.
  local topology
  if [[ $role == head ]] && ((NRL_DEDICATED_HEAD)); then
    # A dedicated head, as ray.sub's DEDICATED_RAY_HEAD: Ray gets none of its GPUs (Slurm gave
    # it some; they stay idle) and no worker_units or topology resources, so no GPU actor lands
    # here; CPU-only tasks may. ray_head names it for placement.
    log "a dedicated CPU head: Ray gets no GPUs and no worker_units on this node"
    NRL_NODE_GPUS=0
    NRL_RESOURCES='{"slurm_managed_ray_cluster": 1, "ray_head": 1}'
  else
    topology=$(topology_resources) || exit 0 # the job is ending
    NRL_RESOURCES="{\"slurm_managed_ray_cluster\": 1, \"worker_units\": $NRL_NODE_GPUS$topology}"
  fi
  # In a dir of this job's own in Ray's node-local temp dir (which Ray makes writable by every
  # user): one another user made first is not written into.
  export NRL_GPU_CPU_AFFINITY_FILE=${NRL_GPU_CPU_AFFINITY_FILE:-/tmp/ray/nrl-$(id -u)-${NRL_LOG_DIR##*/}/gpu-cpu-affinity}
  local affinity_dir=${NRL_GPU_CPU_AFFINITY_FILE%/*}
  mkdir -p -- "${affinity_dir%/*}" 2>/dev/null || true
  if ! { private_dir "$affinity_dir" && write_gpu_cpu_affinity "$NRL_GPU_CPU_AFFINITY_FILE"; }; then
    log "could not write the GPU -> CPU map $NRL_GPU_CPU_AFFINITY_FILE; NeMo RL binds no workers to CPUs"
  fi
  [[ -z $NRL_LOG_SYNC_S ]] || sync_ray_logs &
  compile_caches
  clean_step_env
  "run_$role"
}

# Compile caches (vLLM, TorchInductor, Triton) on this node's own disk, in a dir of the user's
# own, unless the job's env or its shell says where: many nodes compiling into one shared cache
# (a home dir's ~/.cache) corrupt it, and a cache another user made could hand the job their
# compiled code.
compile_caches() {
  local dir
  dir=/tmp/nrl-compile-cache-$(id -u)
  if ! private_dir "$dir"; then
    log "warning: $dir is not yours alone: the compile caches stay where they default"
    return 0
  fi
  export VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-$dir/vllm}
  export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$dir/inductor}
  export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$dir/triton}
}

# What Ray's daemons, and the workers and driver they start, must not take from this Slurm
# step, as with ray.sub: its MPI and PMI variables, on which TensorRT-LLM's MPI_Init in a Ray
# actor aborts (NeMo RL #2420), and Slurm's own (read above). And an open-files limit Ray's
# many sockets need: 65535, where the hard limit allows it.
clean_step_env() {
  local name soft hard
  for name in "${!PMI_@}" "${!PMIX_@}" "${!MPI_@}" "${!OMPI_@}" "${!SLURM_@}"; do
    unset -v "$name"
  done
  soft=$(ulimit -Sn) hard=$(ulimit -Hn)
  [[ $soft != unlimited ]] && ((soft < 65535)) || return 0
  ulimit -Sn 65535 2>/dev/null && return 0
  # The hard limit is lower: as far as it goes.
  [[ $hard == unlimited ]] || ((hard <= soft)) || ulimit -Sn "$hard" 2>/dev/null || true
  log "warning: the open-files limit is $(ulimit -Sn), below 65535 (its hard limit is $hard); Ray may run out of file descriptors"
}

# ray.sub's headroom for large allocations: the GCS's threads and the RPCs it takes at once
# grow with the node's CPUs, and its connect and request timeouts are 120 s. A value in the
# job's environment wins.
gcs_headroom() {
  local cpus=$NRL_NODE_CPUS
  export RAY_gcs_server_rpc_server_thread_num=${RAY_gcs_server_rpc_server_thread_num:-$cpus}
  export RAY_num_server_call_thread=${RAY_num_server_call_thread:-$((cpus / 2 > 0 ? cpus / 2 : 1))}
  export RAY_gcs_server_rpc_client_thread_num=${RAY_gcs_server_rpc_client_thread_num:-$cpus}
  export RAY_gcs_max_active_rpcs_per_handler=${RAY_gcs_max_active_rpcs_per_handler:-$((cpus * 200))}
  export RAY_worker_register_timeout_seconds=${RAY_worker_register_timeout_seconds:-120}
  export RAY_gcs_rpc_server_connect_timeout_s=${RAY_gcs_rpc_server_connect_timeout_s:-120}
  export RAY_gcs_rpc_server_reconnect_timeout_s=${RAY_gcs_rpc_server_reconnect_timeout_s:-120}
  export RAY_gcs_server_request_timeout_seconds=${RAY_gcs_server_request_timeout_seconds:-120}
}

# Whether directory $1 is this user's own: made now (mode 0700), or made earlier by this user
# and not a link.
private_dir() {
  mkdir -m 700 -- "$1" 2>/dev/null || [[ -d $1 && -O $1 && ! -L $1 ]]
}

# ray.log_sync_s (ray.sub's RAY_LOG_SYNC_FREQUENCY): this node's Ray session logs (and the
# nsight profiles Ray writes there) copied into <log dir>/ray/<node>/ every N seconds, and once
# more when the job ends. Only this job's sessions: this user's, made since the job started
# (newer than the log dir's STARTED marker; a shared node's /tmp/ray holds other users' too).
sync_ray_logs() {
  local dest=$NRL_LOG_DIR/ray/$NRL_NODE_NAME session last=0
  mkdir -p -- "$dest"
  while ((!last)); do
    # Sleeps in short steps: the last copy follows the job's end at once.
    local waited=0
    while ((waited < NRL_LOG_SYNC_S * 10)) && [[ ! -e $NRL_LOG_DIR/ENDED ]]; do
      nap 0.1
      waited=$((waited + 1))
    done
    [[ ! -e $NRL_LOG_DIR/ENDED ]] || last=1
    for session in /tmp/ray/session_[0-9]*/; do
      [[ -d ${session}logs && -O $session && $session -nt $NRL_LOG_DIR/STARTED ]] || continue
      session=${session%/}
      mkdir -p -- "$dest/${session##*/}"
      cp -rpu -- "$session/logs" "$dest/${session##*/}/" 2>/dev/null || true
    done
  done
}

# This job's Ray token: 32 random bytes in hex, readable by the job's owner only (the log dir
# is on storage other users may read). Every node and the driver read it through
# RAY_AUTH_TOKEN_PATH (job_env); nothing prints it.
make_ray_token() {
  [[ $NRL_RAY_AUTH == token ]] || return 0
  (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$NRL_LOG_DIR/ray-auth-token")
}

# Ray before 2.52 ignores RAY_AUTH_MODE: the job's cluster would be open to anyone who reaches
# its ports. Checked on the head: a worker with another Ray version cannot join it anyway.
has_ray_auth() {
  [[ $NRL_RAY_AUTH == token ]] || return 0
  local version
  # From the package's metadata: `ray --version` imports Ray, a second or more of CPU while
  # the head starts.
  version=$("$(ray_python)" -c 'import importlib.metadata as m; print(m.version("ray"))' 2>/dev/null) \
    || version=$(ray --version 2>/dev/null) || version=""
  version=${version##* }
  # A version that cannot be read is not taken for a new enough one: the check fails closed.
  if [[ ! $version =~ ^[0-9]+\.[0-9]+ ]]; then
    end_job "cannot read the version of Ray on $NRL_NODE_NAME (token authentication needs Ray 2.52 or later): check \`ray --version\` there, or set ray.auth: off"
    return 1
  fi
  if [[ $(printf '%s\n' 2.52.0 "$version" | sort -V | head -n 1) != 2.52.0 ]]; then
    end_job "Ray $version on $NRL_NODE_NAME has no token authentication (Ray 2.52 or later has): upgrade Ray on the nodes, or set ray.auth: off"
    return 1
  fi
}

# Whether something accepts TCP connections on $1:$2.
listening() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

run_head() {
  local port
  # Another Ray (an earlier job's, or another job's on a shared node) would otherwise answer
  # for this job's head, or make `ray start` fail with a message buried in ray-head.log.
  for port in "${NRL_HEAD_PORTS[@]}"; do
    if listening "$NRL_HEAD_IP" "${port#*=}"; then
      end_job "port ${port#*=} ($port) is already in use on $NRL_HEAD_NODE: another Ray or job holds it"
      log "port ${port#*=} ($port) is already in use on $NRL_HEAD_NODE"
      exit 1
    fi
  done
  if ((NRL_HAS_POOLS)); then start_balancers || exit 1; fi
  log "starting the Ray head on $NRL_HEAD_IP:$NRL_GCS_PORT"
  start_ray --head --block --disable-usage-stats \
    --node-ip-address="$NRL_HEAD_IP" --port="$NRL_GCS_PORT" \
    --ray-client-server-port="$NRL_RAY_CLIENT_SERVER_PORT" \
    --dashboard-host="$NRL_DASHBOARD_HOST" --dashboard-port="$NRL_DASHBOARD_PORT" \
    "${NRL_HEAD_ARGS[@]}" \
    "${NRL_RAY_PORTS[@]}" \
    --num-gpus="$NRL_NODE_GPUS" --num-cpus="$NRL_NODE_CPUS" --resources="$NRL_RESOURCES"
  # Written only once the GCS accepts connections: workers wait for this file.
  local deadline=$((SECONDS + NRL_HEAD_START_TIMEOUT))
  until listening "$NRL_HEAD_IP" "$NRL_GCS_PORT"; do
    if [[ -e $NRL_LOG_DIR/ENDED ]]; then # a worker failed, or a stop: stop starting
      stop_ray
      stop_requested && exit 0
      exit 1
    fi
    if ! kill -0 "$NRL_RAY_PID" 2>/dev/null || ((SECONDS >= deadline)); then
      end_job "the Ray head did not start on $NRL_HEAD_NODE within ${NRL_HEAD_START_TIMEOUT}s; see ray-head.log"
      stop_ray
      exit 1
    fi
    nap 0.1
  done
  touch "$NRL_LOG_DIR/STARTED_RAY_HEAD"
  phase head_up
  # The driver's ray.init(address="auto") reads RAY_ADDRESS first: this job's head, never a
  # cluster a file left in /tmp/ray by an earlier job on this node points at.
  export RAY_ADDRESS="$NRL_HEAD_IP:$NRL_GCS_PORT"

  local dashboard=""
  if ((NRL_RAY_DASHBOARD)); then dashboard=$NRL_DASHBOARD_PORT; fi
  if ! wait_for_nodes "$dashboard"; then
    stop_ray
    stop_requested && exit 0
    exit 1
  fi
  phase all_joined

  local rc=0
  if ((NRL_INTERACTIVE)); then
    log "the cluster is up; it stays up until it is stopped or the time limit"
    watch "$NRL_RAY_PID"
    # Only a requested stop ends an interactive job well; anything else is a failure.
    stop_requested || rc=1
    [[ -e $NRL_LOG_DIR/ENDED ]] || end_job "the Ray head on $NRL_HEAD_NODE exited"
  elif ((NRL_SANDBOX)) && ! wait_for_sandboxes; then
    stop_requested || rc=1
  elif ((NRL_HAS_POOLS)) && ! wait_for_pools; then
    stop_requested || rc=1
  else
    run_driver || rc=$?
  fi
  if ((NRL_HAS_POOLS)); then stop_balancers; fi
  stop_ray
  exit "$rc"
}

