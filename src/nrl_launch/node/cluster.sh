# Helpers of a Ray cluster's scripts (Slurm, local, Lepton): waits, attach, child steps.
# `nrl-launch stop` writes ENDED with this prefix: the one way a job is asked to end well.
stop_requested() { grep -qs '^stop requested' "$NRL_LOG_DIR/ENDED"; }

# Sleeps $1 seconds (fractions too) without starting a process, as `sleep` does: a read that
# times out on a pipe nothing writes to (opened read-write, so it never ends). The waits that
# look every 0.1 s use it: on every node while Ray starts, forks there take CPU from Ray's own
# start (16 nodes sharing 2 cores: enough for Ray's agents to miss their 15 s). A read that
# ends any other way than its timeout (no such pipe here) falls back to `sleep`: never a spin.
nap() {
  local rc=0
  [[ -n ${NRL_NAP_FD:-} ]] || exec {NRL_NAP_FD}<> <(:) 2>/dev/null || NRL_NAP_FD=-
  read -r -t "$1" -u "$NRL_NAP_FD" _ 2>/dev/null || rc=$?
  ((rc > 128)) || sleep "$1"
}


# <JOBID>-attach.sh, with ray.sub's usage; it runs the copy $2 of this script in attach mode.
write_attach_script() {
  local path="$NRL_LOG_DIR/$1-attach.sh"
  {
    printf '#!/usr/bin/env bash\n'
    printf '# Attach to job %s while it runs (nrl-launch attach %s does the same):\n' "$1" "$1"
    printf '#   bash %s            a shell on the head node\n' "${path##*/}"
    printf '#   bash %s K          a shell on node K (0 is the head)\n' "${path##*/}"
    printf "#   COMMAND='ray status' bash %s [K]   one command; its exit code is this script's\n" "${path##*/}"
    printf 'export NRL_ATTACH_JOB=%q NRL_SUBMIT_DIR=%q NRL_HEAD_NODE=%q NRL_HEAD_IP=%q NRL_NODE_LIST=%q NRL_CONTAINER_NAME=%q\n' \
      "$1" "$NRL_SUBMIT_DIR" "$NRL_HEAD_NODE" "$NRL_HEAD_IP" "$NRL_NODE_LIST" "${NRL_CONTAINER_NAME:-}"
    printf 'exec bash %q attach "$@"\n' "$NRL_LOG_DIR/$2"
  } >"$path"
  chmod +x "$path"
}

# `<JOBID>-attach.sh [K|head] [-- CMD...]` (or CMD in $COMMAND): checks K, then hands over to
# the backend's attach_on INDEX SHELL CMD... (SHELL=1: no command, an interactive shell).
attach_main() {
  local index=0 shell=0
  NRL_LOG_DIR=$(cd -- "$(dirname -- "$0")" && pwd)
  export NRL_LOG_DIR
  if (($#)) && [[ $1 != -- ]]; then index=$1; shift; fi
  [[ ${1:-} != -- ]] || shift
  [[ $index != head ]] || index=0
  if ((${NRL_HAS_POOLS:-0})) && [[ $index =~ ^([a-z][a-z0-9_]*)\.([0-9]+)$ ]]; then
    local pool=${BASH_REMATCH[1]} replica=$((10#${BASH_REMATCH[2]}))
    if ((!$#)) && [[ -n ${COMMAND:-} ]]; then set -- bash -c "$COMMAND"; elif ((!$#)); then shell=1; fi
    attach_pool "$pool" "$replica" "$shell" "$@"
  fi
  if [[ ! $index =~ ^[0-9]+$ ]] || ((10#$index >= NRL_NODES)); then
    echo "attach: no node '$index' in job $NRL_ATTACH_JOB: it has nodes 0 (the head) to $((NRL_NODES - 1))" >&2
    exit 2
  fi
  if ((!$#)) && [[ -n ${COMMAND:-} ]]; then
    set -- bash -c "$COMMAND"
  elif ((!$#)); then
    shell=1
  fi
  attach_on $((10#$index)) "$shell" "$@"
}

# Waits up to $2 seconds for child $1 to exit; fails if it still runs then.
exited_within() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}

# Waits up to $2 seconds for child $1 to exit (then kills it); returns its exit status.
wait_bounded() {
  exited_within "$1" "$2" || kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null
}

# Ends child $1 once the job is ending: it has $2 seconds to see ENDED and stop by itself,
# then SIGTERM (srun passes it to every task, whose trap stops Ray), then SIGKILL.
end_child() {
  exited_within "$1" "$2" || kill -TERM "$1" 2>/dev/null || true
  wait_bounded "$1" 45
}

# Returns when process $1 exits or ENDED appears, whichever is first. Every node watches
# ENDED: it is how one node's failure, or a stop, reaches all the others.
watch() {
  while kill -0 "$1" 2>/dev/null && [[ ! -e $NRL_LOG_DIR/ENDED ]]; do sleep 1; done
}
