# The sandbox sidecar (sandbox:, ray.sub's SANDBOX_CONTAINER and SANDBOX_COMMAND), on Slurm.
# One sandbox per node, in a step of its own started before Ray's; the head starts the driver
# only once every node's sandbox answers on sandbox.port, and a sandbox that exits ends the job,
# naming its node. Its values (NRL_SANDBOX_*, sandbox_env) are in the job's header; needs
# NRL_LOG_DIR, NRL_NODES and NRL_NODE_LIST from the batch step.
#
# The code a sandbox runs comes from a model. It sees nothing of the job but the exchange dir
# <log dir>/sandbox (its port files, and where each node's sandbox says it is up; at /nrl-sandbox
# in its container, NeMo Skills' SANDBOX_PORTS_DIR), which the job
# reads as data only: not the log dir (the nodes run its job.sbatch, attach its attach script),
# not the job's environment (secrets, the login shell's variables), not the Ray token. It runs
# from a program passed on the command line, not from a file it could rewrite, in a container of
# its own, and, where its image can, in PID and user namespaces of its own: it can then neither
# see nor signal the job's other processes.
NRL_SANDBOX_PID=""

# What the sandbox step runs (bash -c): the wrapper's functions, then sandbox_main with the
# sandbox's command as its arguments.
sandbox_program() {
  declare -f log listening wait_bounded exited_within sandbox_isolation stop_sandbox \
    sandbox_failed sandbox_main
  printf 'set -euo pipefail\numask 077\nsandbox_main "$@"\n'
}

# Starts the sandbox step in the background, one task on every node (NRL_SANDBOX_PID, which
# the batch step sees end). Each node's output is sandbox-<node>.log in the log dir.
start_sandbox_step() {
  local args=()
  mkdir -- "$NRL_LOG_DIR/sandbox"
  if [[ -n $NRL_SANDBOX_IMAGE ]]; then
    if [[ $NRL_LOG_DIR == *[,:]* ]]; then
      end_job "the log dir $NRL_LOG_DIR holds ',' or ':', which pyxis cannot mount into the sandbox's container"
      return 1
    fi
    # The sandbox's own image and mounts, never the Ray container's, and no --container-name:
    # pyxis removes the container when the step ends. Not root in it (pyxis's remap-root), so
    # that it cannot make a read-only mount writable.
    local mounts=$NRL_SANDBOX_MOUNTS
    mounts="${mounts:+$mounts,}$NRL_LOG_DIR/sandbox:/nrl-sandbox"
    args=(--container-image="$NRL_SANDBOX_IMAGE" "--container-mounts=$mounts"
      --no-container-mount-home --no-container-remap-root)
  fi
  # --overlap: the step shares the CPUs, memory and GPUs Ray's steps take (Slurm >= 21.08: it
  # overlaps them even though they do not say --overlap). One task's failure ends the step (and
  # so the job) at once. srun reads % in --output as a pattern: the log dir's own is doubled.
  (
    sandbox_env
    exec srun --overlap --nodes="$NRL_NODES" --ntasks="$NRL_NODES" --ntasks-per-node=1 \
      --kill-on-bad-exit=1 --export="$NRL_SANDBOX_EXPORT" \
      --output="${NRL_LOG_DIR//%/%%}/sandbox-%N.log" "${args[@]}" \
      bash -c "$(sandbox_program)" nrl-sandbox "${NRL_SANDBOX_COMMAND[@]}"
  ) &
  NRL_SANDBOX_PID=$!
  log "sandbox step started on $NRL_NODES node(s): ${NRL_SANDBOX_COMMAND[*]}"
}

# Why node $1's sandbox failed, from what it wrote to FAILED.<node> ($2: what happened, $3: its
# exit code), in the job's own words; fails for anything else. The exchange dir is the
# sandbox's: its words are checked, never run or quoted.
sandbox_failure() {
  [[ -z ${3:-} || $3 =~ ^[0-9]{1,3}$ ]] || return 1
  case $2 in
    port-in-use) printf 'port %s (sandbox.port) is already in use on node %s: another job or sandbox holds it' "$NRL_SANDBOX_PORT" "$1" ;;
    exited-before-ready) printf 'the sandbox on node %s exited with code %s before it answered on port %s; see sandbox-%s.log' "$1" "${3:-?}" "$NRL_SANDBOX_PORT" "$1" ;;
    no-answer) printf 'the sandbox on node %s did not answer on port %s within %s s; see sandbox-%s.log' "$1" "$NRL_SANDBOX_PORT" "$NRL_SANDBOX_READY_TIMEOUT" "$1" ;;
    exited) printf 'the sandbox on node %s exited with code %s; see sandbox-%s.log' "$1" "${3:-?}" "$1" ;;
    *) return 1 ;;
  esac
}

# After the batch step's first_to_end ($1: its exit code, $2: the head step's pid), when what
# ended is the sandbox step. If the job is not already ending, it ends for it, with the reason
# the failing node's sandbox gave. If it is (the driver is done, a stop), the sandboxes stop
# within seconds of ENDED while the head may still be stopping Ray: the head gets up to a minute
# to end by itself, so that its exit code decides, not a SIGTERM.
sandbox_step_ended() {
  local node missing="" kind code reason=""
  if [[ -z $NRL_SANDBOX_PID ]] || kill -0 "$NRL_SANDBOX_PID" 2>/dev/null; then
    return 0
  fi
  if [[ -e $NRL_LOG_DIR/ENDED ]]; then
    exited_within "$2" 60 || true
    return 0
  fi
  for node in $NRL_NODE_LIST; do
    [[ -e $NRL_LOG_DIR/sandbox/STARTED.$node ]] || missing+="${missing:+ }$node"
    if [[ -z $reason && -f $NRL_LOG_DIR/sandbox/FAILED.$node ]] &&
      read -r -n 64 kind code <"$NRL_LOG_DIR/sandbox/FAILED.$node"; then
      reason=$(sandbox_failure "$node" "$kind" "${code:-}") || reason=""
    fi
  done
  end_job "${reason:-the sandbox step ended (exit $1) while the job was running${missing:+ (no sandbox started on: $missing)}; see sandbox-*.log and slurm-$SLURM_JOB_ID.out}"
  log "the sandbox step ended first (exit $1): stopping the job"
}

# At the job's end: the sandbox step is stopped through srun (SIGTERM to every node's wrapper,
# which stops its sandbox). It cannot see ENDED: the log dir is not the sandbox's.
stop_sandbox_step() {
  [[ -n $NRL_SANDBOX_PID ]] || return 0
  end_child "$NRL_SANDBOX_PID" 0 || true
  NRL_SANDBOX_PID=""
}

# ---- In the sandbox step, on every node: its wrapper ----
# Sets NRL_ISOLATE to what runs the sandbox's command in PID and user namespaces of its own
# (unshare, util-linux 2.38 or later in the sandbox's image), as this user without privileges:
# its code then sees and signals only its own processes. pyxis gives a container no PID
# namespace of its own. Without that unshare (or with sandbox.isolate_pids false), it is said.
sandbox_isolation() {
  local ids=(--map-user="$(id -u)" --map-group="$(id -g)")
  NRL_ISOLATE=()
  ((NRL_SANDBOX_ISOLATE)) || return 0
  if unshare --user "${ids[@]}" --pid --fork --mount-proc --kill-child true 2>/dev/null; then
    NRL_ISOLATE=(unshare --user "${ids[@]}" --pid --fork --mount-proc --kill-child --)
  else
    log "no PID namespace for the sandbox on $1: its image has no unshare with --map-user (util-linux 2.38 or later), or forbids one; its code can see and signal your other processes on this node"
  fi
}

# Stops the sandbox's command and everything it started (its process group, or its PID
# namespace), SIGTERM first.
stop_sandbox() {
  local pid=${NRL_SANDBOX_CMD_PID:-}
  [[ -n $pid ]] || return 0
  NRL_SANDBOX_CMD_PID=""
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  wait_bounded "$pid" 10 || true
  kill -KILL -- "-$pid" 2>/dev/null || true
}

# Ends this node's sandbox: $1 is what happened (sandbox_failure's words), $2 its exit code,
# written to FAILED.<node> for the batch step, which says why the job ended.
sandbox_failed() {
  # shellcheck disable=SC2153 # NRL_SANDBOX_DIR: set by the header's sandbox_env, which starts the step
  printf '%s %s\n' "$1" "${2:-}" >"$NRL_SANDBOX_DIR/FAILED.$NRL_SANDBOX_NODE"
  log "the sandbox on $NRL_SANDBOX_NODE failed: $1 ${2:-}"
  stop_sandbox
  exit 1
}

# The sandbox's command ($@) on this node, watched until the job stops the step.
sandbox_main() {
  local rc=0 deadline=$((SECONDS + NRL_SANDBOX_READY_TIMEOUT))
  NRL_SANDBOX_NODE=${SLURMD_NODENAME:-$(hostname)}
  NRL_SANDBOX_CMD_PID=""
  log "sandbox on $NRL_SANDBOX_NODE: $* (port $NRL_SANDBOX_PORT, workers from $SANDBOX_WORKER_BASE_PORT)"
  printf '%s\n' "$(date +%s.%N)" >"$NRL_SANDBOX_DIR/STARTED.$NRL_SANDBOX_NODE"
  # srun's SIGTERM (the job's end, scancel, the time limit): the batch step says why.
  trap 'stop_sandbox; exit 143' TERM
  # Another sandbox (another job's, on a shared node) would answer for this one.
  if listening 127.0.0.1 "$NRL_SANDBOX_PORT"; then
    sandbox_failed port-in-use
  fi
  sandbox_isolation "$NRL_SANDBOX_NODE"
  # In a process group of its own, as Ray (see stop_ray): nginx and the workers it starts go
  # with it.
  if command -v setsid >/dev/null; then
    setsid "${NRL_ISOLATE[@]}" "$@" &
  else
    "${NRL_ISOLATE[@]}" "$@" &
  fi
  NRL_SANDBOX_CMD_PID=$!
  # Where the job's clients ask for it (NEMO_SKILLS_SANDBOX_HOST).
  until listening 127.0.0.1 "$NRL_SANDBOX_PORT"; do
    if ! kill -0 "$NRL_SANDBOX_CMD_PID" 2>/dev/null; then
      wait "$NRL_SANDBOX_CMD_PID" || rc=$?
      NRL_SANDBOX_CMD_PID=""
      sandbox_failed exited-before-ready "$rc"
    fi
    ((SECONDS < deadline)) || sandbox_failed no-answer
    sleep 1
  done
  # Written whole, then renamed: the head reads the time in it.
  printf '%s\n' "$(date +%s.%N)" >"$NRL_SANDBOX_DIR/.READY.$NRL_SANDBOX_NODE"
  mv -f -- "$NRL_SANDBOX_DIR/.READY.$NRL_SANDBOX_NODE" "$NRL_SANDBOX_DIR/READY.$NRL_SANDBOX_NODE"
  log "the sandbox on $NRL_SANDBOX_NODE answers on port $NRL_SANDBOX_PORT"
  wait "$NRL_SANDBOX_CMD_PID" || rc=$?
  NRL_SANDBOX_CMD_PID=""
  sandbox_failed exited "$rc"
}

# On the head, before the driver: waits until every node's sandbox has answered (READY.<node>),
# adding each one's time to the timeline. Fails when the job ends meanwhile, or when a node's
# sandbox has not answered well after its own bound (its step never started there, say).
wait_for_sandboxes() {
  local bound=$((NRL_SANDBOX_READY_TIMEOUT + 60)) names=() node at missing
  local deadline=$((SECONDS + bound))
  local -A seen=()
  read -r -a names <<<"$NRL_NODE_LIST"
  log "waiting for the sandbox on each of the $NRL_NODES node(s) to answer on port $NRL_SANDBOX_PORT"
  while true; do
    missing=""
    for node in "${names[@]}"; do
      [[ -z ${seen[$node]:-} ]] || continue
      # The sandbox's file: a time, or it does not count (nor is it copied to the timeline).
      if [[ -f $NRL_LOG_DIR/sandbox/READY.$node ]] && read -r -n 32 at <"$NRL_LOG_DIR/sandbox/READY.$node" &&
        [[ $at =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
        seen[$node]=1
        printf 'sandbox_ready:%s %s\n' "${node%%.*}" "$at" >>"$NRL_LOG_DIR/timeline"
      else
        missing+="${missing:+ }$node"
      fi
    done
    if [[ -z $missing ]]; then
      phase sandboxes_ready
      log "the sandbox answers on every node"
      return 0
    fi
    [[ ! -e $NRL_LOG_DIR/ENDED ]] || return 1
    if ((SECONDS >= deadline)); then
      node=${missing%% *}
      if [[ -e $NRL_LOG_DIR/sandbox/STARTED.$node ]]; then
        end_job "the sandbox on node $node did not answer on port $NRL_SANDBOX_PORT within ${bound} s of the head's wait; see sandbox-$node.log"
      else
        # On the head, where Slurm's variables are gone: the job's id from its log dir's name.
        local id=${NRL_LOG_DIR##*/}
        end_job "the sandbox step never started on node $node within ${bound} s of the head's wait (its image still importing, or srun could not start it); see sandbox-$node.log and slurm-${id%%-*}.out"
      fi
      log "no sandbox answered on: $missing"
      return 1
    fi
    sleep 1
  done
}

