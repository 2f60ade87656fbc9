run_driver() {
  local workdir limit=() rc=0
  workdir=$(driver_workdir)
  [[ -z $NRL_DRIVER_TIMEOUT ]] || limit=(timeout --kill-after=30 "$NRL_DRIVER_TIMEOUT")
  log "starting the driver in $workdir: ${NRL_DRIVER[*]}"
  phase driver_started
  # NeMo RL logs how long the job took to get here (nemo_rl/utils/logger.py reads these, which
  # ray.sub sets too): the batch script's start and now.
  NRL_JOB_START_EPOCH=$(awk '$1 == "started" { print $2; exit }' "$NRL_LOG_DIR/timeline")
  NRL_RAY_READY_EPOCH=$(date +%s.%N)
  export NRL_JOB_START_EPOCH NRL_RAY_READY_EPOCH
  save_by_setup # NeMo RL's save deadline, from the job's end (deadline.sh)
  (cd -- "$workdir" && snapshot_env && save_by_env && exec "${limit[@]}" "${NRL_DRIVER[@]}" "${NRL_SAVE_BY_ARGS[@]}") \
    >>"$NRL_LOG_DIR/ray-driver.log" 2>&1 &
  NRL_DRIVER_PID=$!
  watch_driver "$NRL_DRIVER_PID"
  if kill -0 "$NRL_DRIVER_PID" 2>/dev/null; then
    log "stopping the driver: $(<"$NRL_LOG_DIR/ENDED")"
    if stop_requested; then
      # A requested stop ends the job well, whatever the driver answers SIGTERM with; it gets
      # 30 s for that (a checkpoint, say).
      stop_driver 30 || rc=$?
      log "the driver stopped with code $rc"
      return 0
    fi
    stop_driver || true
    return 1
  fi
  wait "$NRL_DRIVER_PID" || rc=$?
  NRL_DRIVER_PID=""
  phase driver_ended
  if [[ -n $NRL_DRIVER_TIMEOUT ]] && ((rc == 124)); then
    end_job "the driver ran longer than ray.timeouts.driver_s=${NRL_DRIVER_TIMEOUT}s"
  else
    end_job "driver exited with code $rc"
  fi
  log "driver exited with code $rc"
  return "$rc"
}

# The Python that runs `ray`: it can import ray (the driver's python3 may not). pip writes that
# interpreter into the script's first line (or, where its path is too long for `#!`, into a
# /bin/sh trampoline's second); `ray` may be a symlink into a venv (next to the link is another
# Python), so the script's own directory comes after. Fails where `ray` is not pip's script
# (a site's wrapper, say), printing that directory's Python or python3.
ray_python() {
  local ray_bin first="" second="" own=0 python=python3
  ray_bin=$(command -v ray)
  { read -r first && read -r second; } <"$ray_bin" || true
  first=${first#\#!}
  first=${first%% *}
  if [[ ${first##*/} == python* && -x $first ]]; then
    printf '%s' "$first"
    return
  fi
  [[ $second != "'''exec' "* ]] || own=1
  ray_bin=$(readlink -f -- "$ray_bin")
  [[ ! -x ${ray_bin%/*}/python ]] || python=${ray_bin%/*}/python
  printf '%s' "$python"
  ((own)) && [[ $python != python3 ]]
}

# `ray start` in Ray's own process group (setsid, see stop_ray), as NRL_RAY_PID, and note_joined
# beside it.
start_ray() {
  local from python
  from=$(stat -c %s -- "$NRL_NODE_LOG" 2>/dev/null) || from=0
  if python=$(ray_python); then
    # The `ray` command's `ray start` (ray_start.py): the head's raylet starts beside its
    # dashboard, not after it; a worker's `ray start` begins once the head node is up.
    setsid "$python" -c "$(ray_start_source)" "$NRL_HEAD_IP:$NRL_GCS_PORT" \
      start "$@" "${NRL_RAY_ARGS[@]}" &
  else
    setsid ray start "$@" "${NRL_RAY_ARGS[@]}" &
  fi
  NRL_RAY_PID=$!
  note_joined "$from" "$NRL_RAY_PID" &
}

# Writes joined/<node index> ("<node name> <GPUs> <epoch>") once this node's `ray start` prints
# "Ray runtime started.", which Ray prints only after the GCS lists the node (or, sooner,
# ray_start.py prints that the GCS lists the node alive): the head counts these files, and
# nothing imports Ray on the head while the nodes start. $1: the node log's size before this
# `ray start`; $2: its pid (this gives up when it exits). The log is read by bash itself, each
# look going on from where the last stopped: no process every 0.1 s.
note_joined() {
  local joined=$NRL_LOG_DIR/joined log text="" part=""
  exec {log}<"$NRL_NODE_LOG" || return 0
  # Past what earlier attempts wrote; bytes, not characters (C locale).
  ((!$1)) || LC_ALL=C read -r -N "$1" _ <&"$log" || true
  while true; do
    # Whole lines; a line still being written is kept in `part` until its end comes.
    while IFS= read -r text <&"$log"; do
      case $part$text in
        *"Ray runtime started."* | *"nrl-launch: the GCS lists this node alive"*) break 2 ;;
      esac
      part=""
    done
    part+=$text
    if ! kill -0 "$2" 2>/dev/null; then
      exec {log}<&-
      return 0
    fi
    nap 0.1
  done
  exec {log}<&-
  mkdir -p -- "$joined"
  printf '%s %s %s\n' "$NRL_NODE_NAME" "$NRL_NODE_GPUS" "$(date +%s.%N)" >"$joined/.$NRL_NODE_INDEX"
  mv -f -- "$joined/.$NRL_NODE_INDEX" "$joined/$NRL_NODE_INDEX"
}

# Counts the nodes (and their GPUs) that joined, on the head, until all have (or the join
# timeout passes); keeps readiness.json current and logs ray.sub's "Number of actors online:
# X/Y" line. A short sleep between looks lets a SIGTERM reach the step's trap at once. With $1
# (the dashboard's port), notes `dashboard_up` in the timeline once the dashboard answers on
# the head's address (looked at every half second), if it does before the last node joins:
# Ray starts the head's raylet only then, ray_start.py while the dashboard starts.
wait_for_nodes() {
  # A dedicated head joins with no GPUs: the GPU nodes are the others.
  local deadline=$((SECONDS + NRL_JOIN_TIMEOUT))
  local gpus_expected=$(((NRL_NODES - NRL_DEDICATED_HEAD) * NRL_GPUS_PER_NODE))
  local nodes gpus last="" file name node_gpus at k missing="" logs="" names=() head=""
  local -A seen=()
  local looks=0 dashboard_port=${1:-}
  # status names a dedicated head (a job without one keeps the file as it was).
  ((!NRL_DEDICATED_HEAD)) || head=', "dedicated_head": 1'
  while true; do
    if ((looks >= 0 && looks++ % 5 == 0)) && [[ -n $dashboard_port ]] &&
      listening "${NRL_HEAD_IP:-}" "$dashboard_port"; then
      phase dashboard_up
      looks=-1
    fi
    nodes=0 gpus=0
    for file in "$NRL_LOG_DIR"/joined/*; do
      if [[ ! -f $file ]] || ! read -r name node_gpus at <"$file"; then continue; fi
      # A file's words are data, never code: bash would run a $(...) in them in arithmetic.
      [[ $node_gpus =~ ^[0-9]+$ && $at =~ ^[0-9]+(\.[0-9]+)?$ ]] || continue
      nodes=$((nodes + 1)) gpus=$((gpus + node_gpus))
      if [[ -z ${seen[${file##*/}]:-} ]]; then
        seen[${file##*/}]=1
        printf 'joined:%s %s\n' "${name%%.*}" "$at" >>"$NRL_LOG_DIR/timeline"
      fi
    done
    if [[ "$nodes $gpus" != "$last" ]]; then
      last="$nodes $gpus"
      printf 'Number of actors online: %s/%s\n' "$gpus" "$gpus_expected"
      printf '{"nodes": %s, "nodes_expected": %s, "gpus": %s, "gpus_expected": %s%s}\n' \
        "$nodes" "$NRL_NODES" "$gpus" "$gpus_expected" "$head" >"$NRL_LOG_DIR/readiness.json.tmp"
      mv -f -- "$NRL_LOG_DIR/readiness.json.tmp" "$NRL_LOG_DIR/readiness.json"
    fi
    ((nodes < NRL_NODES || gpus < gpus_expected)) || return 0
    [[ ! -e $NRL_LOG_DIR/ENDED ]] || return 1
    if ((SECONDS >= deadline)); then
      read -r -a names <<<"$NRL_NODE_LIST"
      for k in "${!names[@]}"; do
        [[ -n ${seen[$k]:-} ]] && continue
        missing+="${missing:+, }${names[k]} (node $k)"
        if ((k == 0)); then logs+="${logs:+, }ray-head.log"; else logs+="${logs:+, }ray-worker-$k.log"; fi
      done
      end_job "not every node joined within ${NRL_JOIN_TIMEOUT}s: ${missing:-GPUs} missing; see ${logs:-readiness.json}"
      log "not every node joined within ${NRL_JOIN_TIMEOUT}s: ${missing:-GPUs} missing"
      return 1
    fi
    nap 0.1
  done
}

# Whether a live (not zombie) raylet is in process group $1 (that of this node's `ray start`):
# read from /proc, as containers may lack pgrep.
raylet_in_group() {
  local stat rest state pgrp
  for stat in /proc/[0-9]*/stat; do
    read -r rest 2>/dev/null <"$stat" || continue
    [[ $rest == *" (raylet) "* ]] || continue
    read -r state _ pgrp _ <<<"${rest##*) }"
    [[ $state == Z || $pgrp != "$1" ]] || return 0
  done
  return 1
}

run_worker() {
  # The head fails the job (ENDED) if it cannot start; this bound only covers a head that
  # never got to run at all.
  local deadline=$((SECONDS + NRL_HEAD_START_TIMEOUT + NRL_JOIN_TIMEOUT)) attempt rc
  # `ray start` begins once the head's GCS port answers, as the bare limit's workers do. Begun
  # earlier, Ray's first look for a GCS that is not up yet fails after its connect timeout and
  # a 1 s sleep (and its read of the session's name sleeps 2 s more): several seconds lost
  # where the GCS comes up just after (issue 37). With the job's token, no other Ray can take
  # this worker in (another cluster on the head's address rejects it), so the port is enough;
  # without one, the worker also waits for this job's head to say it is up. The GCS port is
  # asked every 0.1 s (a refused connection costs nothing); the shared log dir only once it
  # answers, and every second for ENDED.
  local looks=0
  until listening "$NRL_HEAD_IP" "$NRL_GCS_PORT" &&
    { [[ $NRL_RAY_AUTH == token ]] || [[ -e $NRL_LOG_DIR/STARTED_RAY_HEAD ]]; }; do
    if ((looks++ % 10 == 0)); then
      [[ ! -e $NRL_LOG_DIR/ENDED ]] || exit 0
      no_head_by "$deadline"
    fi
    nap 0.1
  done
  # A join can fail for reasons that pass: Ray gives a node 30 s to register (a head swamped
  # by many nodes joining at once can take longer) and its raylet 15 s to see its agents up.
  # A failed attempt is retried, up to 10 and within the bound above (ray.sub retries 20
  # times).
  attempt=0
  while ((attempt < 10)); do
    attempt=$((attempt + 1))
    log "joining $NRL_HEAD_IP:$NRL_GCS_PORT (attempt $attempt)"
    start_ray --block --address="$NRL_HEAD_IP:$NRL_GCS_PORT" --disable-usage-stats \
      "${NRL_RAY_PORTS[@]}" \
      --num-gpus="$NRL_NODE_GPUS" --num-cpus="$NRL_NODE_CPUS" --resources="$NRL_RESOURCES"
    # Until this node has joined, the bound above still holds.
    local raylet_seen=0
    while kill -0 "$NRL_RAY_PID" 2>/dev/null && [[ ! -e $NRL_LOG_DIR/ENDED ]]; do
      [[ ! -e $NRL_LOG_DIR/joined/$NRL_NODE_INDEX ]] || { sleep 1; continue; }
      no_head_by "$deadline"
      # Ray's raylet aborts when its agents do not come up within Ray's fixed wait (15 s), as
      # on nodes importing Ray off a slow file system or many nodes starting on shared cores;
      # `ray start` then waits 30 s more for it. Retry as soon as the raylet is gone.
      if raylet_in_group "$NRL_RAY_PID"; then
        raylet_seen=1
      elif ((raylet_seen)); then
        log "the raylet exited before this node joined (its reason: raylet.out in /tmp/ray/session_latest/logs on $NRL_NODE_NAME)"
        kill -KILL -- "-$NRL_RAY_PID" 2>/dev/null || true
        break
      fi
      sleep 1
    done
    if [[ -e $NRL_LOG_DIR/ENDED ]]; then
      stop_ray
      exit 0
    fi
    rc=0
    wait "$NRL_RAY_PID" || rc=$?
    kill -KILL -- "-$NRL_RAY_PID" 2>/dev/null || true # what is left of Ray's group
    NRL_RAY_PID=""
    # Once this node has joined (or all have), Ray exiting is this node failing, not a join
    # to retry.
    if [[ -e $NRL_LOG_DIR/joined/$NRL_NODE_INDEX ]] || grep -qs "^all_joined " "$NRL_LOG_DIR/timeline"; then
      end_job "Ray on node $NRL_NODE_NAME exited (code $rc) while the job was running"
      exit 1
    fi
    ((SECONDS < deadline)) || break
    # Retries spread out, over a window that doubles with each attempt (10 s, 20 s, ... 120 s):
    # nodes that failed together (an overloaded head or file system) do not retry together.
    local window=$((10 << (attempt - 1)))
    ((window < 120)) || window=120
    local pause=$((1 + RANDOM % window))
    log "next attempt in $pause s"
    sleep "$pause"
  done
  end_job "worker $NRL_NODE_NAME could not join the Ray head at $NRL_HEAD_IP:$NRL_GCS_PORT ($attempt attempts, the last exited with code $rc; see ray-worker-$NRL_NODE_INDEX.log)"
  exit 1
}

# Fails the job if the worker has not joined by $1 (SECONDS): the head never came up.
no_head_by() {
  ((SECONDS >= $1)) || return 0
  end_job "worker $NRL_NODE_NAME saw no Ray head within $((NRL_HEAD_START_TIMEOUT + NRL_JOIN_TIMEOUT))s"
  stop_ray
  exit 1
}

# ---- attach-node: what `nrl-launch attach` (or <JOBID>-attach.sh) runs on a node ----
# The job's environment and setup command, then a shell or the command, pointed at this job's
# Ray (`ray status` and ray.init("auto") read RAY_ADDRESS).
attach_node() {
  enter_job_env || { echo "attach: the job's setup command failed" >&2; exit 1; }
  export RAY_ADDRESS="$NRL_HEAD_IP:$NRL_GCS_PORT"
  cd -- "$(driver_workdir)" || exit
  (($#)) || exec bash -i
  exec "$@"
}
