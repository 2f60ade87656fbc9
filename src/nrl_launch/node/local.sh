# The local script's own part (this machine is the job's one node); then the mode dispatch.
# ---- The job: this machine is node 0 ----
local_main() {
  local base=$NRL_BASE_LOG_DIR
  # This machine is the whole cluster, even when run inside a Slurm allocation: the node steps
  # must not take their GPU count or node name from one.
  unset -v "${!SLURM_@}" SLURMD_NODENAME
  NRL_SUBMIT_DIR=$PWD
  [[ $base == /* ]] || base="$NRL_SUBMIT_DIR/$base"
  # Exported where it is set: shellcheck takes a bare `export NRL_LOG_DIR` for an unquoted
  # use of the user's log dir (SC2090).
  export NRL_LOG_DIR="$base/$1-logs"
  start_log_dir job.sh "$(date +%s.%N)"
  make_ray_token || { end_job "cannot write the job's Ray token into $NRL_LOG_DIR"; phase ended; exit 1; }
  # From here on a cancel is recorded, however early it comes.
  trap 'cancelled "the job was cancelled"' TERM INT
  NRL_HEAD_NODE=$(hostname)
  NRL_HEAD_IP=127.0.0.1
  NRL_NODE_LIST=$NRL_HEAD_NODE
  export NRL_HEAD_NODE NRL_HEAD_IP NRL_NODE_LIST NRL_SUBMIT_DIR
  log "job $1 on $NRL_HEAD_NODE, logs in $NRL_LOG_DIR"
  write_attach_script "$1" job.sh
  # Before the head: the pools' replicas start while Ray comes up.
  if ((NRL_HAS_POOLS)); then start_local_pools; fi

  run_head_here
}

# ---- Attach (attach_main): this machine is the job's only node, node 0 ----
attach_on() {
  shift 2
  attach_node "$@"
}

# Sourced (`source job.sbatch`: a test, or a person trying one of its functions), the script
# defines its values and functions and runs nothing.
[[ ${BASH_SOURCE[0]-$0} == "$0" ]] || return 0
case ${1:-} in
  head) node_main head ;;
  attach) shift; attach_main "$@" ;;
  "" | -*) echo "usage: $0 JOBID | attach [0] [-- CMD...]" >&2; exit 2 ;;
  *) local_main "$1" ;;
esac
