# The Lepton script's own part (every worker of the Lepton job runs it); then the mode dispatch.
# ---- Each worker: who it is, and where the head is ----
lepton_main() {
  local index=${LEPTON_JOB_WORKER_INDEX:-} total=${LEPTON_JOB_TOTAL_WORKERS:-} name=${LEPTON_JOB_NAME:-}
  if [[ ! $index =~ ^[0-9]+$ || ! $total =~ ^[0-9]+$ || -z $name ]]; then
    echo "$0: LEPTON_JOB_WORKER_INDEX, LEPTON_JOB_TOTAL_WORKERS and LEPTON_JOB_NAME are not set: this runs as a worker of a Lepton job" >&2
    exit 2
  fi
  # Lepton's defaults when a job sets neither (seed 004).
  local prefix=${LEPTON_JOB_SERVICE_PREFIX:-$name} subdomain=${LEPTON_SUBDOMAIN:-$name-job-svc}
  local nodes=() k
  for ((k = 0; k < total; k++)); do nodes+=("$prefix-$k.$subdomain"); done
  export NRL_LOG_DIR="$NRL_BASE_LOG_DIR/$name-logs"
  NRL_HEAD_NODE=${nodes[0]}
  NRL_NODE_NAME=${nodes[index]}
  NRL_NODE_LIST="${nodes[*]}"
  NRL_SUBMIT_DIR=$PWD
  # What Lepton gave this worker, declared to Ray as Slurm's allocation is.
  NRL_NODE_GPUS=${LEPTON_RESOURCE_ACCELERATOR_NUM:-$NRL_GPUS_PER_NODE}
  export NRL_HEAD_NODE NRL_NODE_NAME NRL_NODE_LIST NRL_SUBMIT_DIR NRL_NODE_GPUS
  # Lepton's NCCL_SOCKET_IFNAME names the interfaces of its 8-GPU nodes; on smaller ones NCCL
  # finds its own (seed 004). A value in the job's env is kept.
  if ((!NRL_ENV_SETS_NCCL_SOCKET_IFNAME && NRL_NODE_GPUS != 8)); then unset NCCL_SOCKET_IFNAME; fi
  if ((index == 0)); then
    lepton_head "$name" "$total"
  else
    lepton_worker "$index"
  fi
}

# The head's name resolves some time after the workers start (Lepton's DNS): wait, bounded.
resolve_head() {
  local deadline=$((SECONDS + NRL_HEAD_START_TIMEOUT)) ip=""
  while true; do
    ip=$(getent ahostsv4 "$NRL_HEAD_NODE" | awk '{ print $1; exit }') || true
    [[ -z $ip ]] || break
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
  NRL_HEAD_IP=$ip
  export NRL_HEAD_IP
}

# Worker 0: the log dir, the job's Ray token, then the head step; its exit code is the job's.
lepton_head() {
  start_log_dir job.sh "$(date +%s.%N)"
  make_ray_token || { end_job "cannot write the job's Ray token into $NRL_LOG_DIR"; phase ended; exit 1; }
  # From here on a stop is recorded, however early it comes.
  trap 'cancelled "Lepton stopped the job"' TERM INT
  log "job $1: $2 worker(s), head $NRL_HEAD_NODE, logs in $NRL_LOG_DIR"
  if (($2 != NRL_NODES)); then
    end_job "Lepton started $2 workers; the job was rendered for $NRL_NODES (slurm.nodes)"
  elif ((NRL_NODE_GPUS != NRL_GPUS_PER_NODE)); then
    end_job "Lepton gives each worker $NRL_NODE_GPUS GPUs; the job was rendered for $NRL_GPUS_PER_NODE (slurm.gpus_per_node)"
  elif ! resolve_head; then
    end_job "the head's name $NRL_HEAD_NODE did not resolve within ${NRL_HEAD_START_TIMEOUT}s"
  fi
  if [[ -e $NRL_LOG_DIR/ENDED ]]; then
    phase ended
    printf '1\n' >"$NRL_LOG_DIR/exit_code"
    log "job ended: $(<"$NRL_LOG_DIR/ENDED")"
    exit 1
  fi
  run_head_here
}

# Worker K > 0: once worker 0 has made the log dir (and the token in it), the worker step.
# Without a token, the timeline says the log dir is made: start_log_dir writes it last.
lepton_worker() {
  # Every worker gets the spec in its environment; worker 0 writes it to spec.json, and no
  # worker's steps, Ray or driver inherit it.
  unset NRL_JOB_SPEC
  local deadline=$((SECONDS + NRL_HEAD_START_TIMEOUT))
  until [[ -e $NRL_LOG_DIR/ray-auth-token || -e $NRL_LOG_DIR/ENDED ]] \
    || { [[ $NRL_RAY_AUTH != token ]] && [[ -e $NRL_LOG_DIR/timeline ]]; }; do
    if ((SECONDS >= deadline)); then
      echo "$0: worker $1 saw no log dir $NRL_LOG_DIR from worker 0 within ${NRL_HEAD_START_TIMEOUT}s: is logs.base_dir on storage every worker mounts?" >&2
      exit 1
    fi
    sleep 1
  done
  [[ ! -e $NRL_LOG_DIR/ENDED ]] || exit 0
  if ! resolve_head; then
    end_job "worker $1 could not resolve the head's name $NRL_HEAD_NODE within ${NRL_HEAD_START_TIMEOUT}s"
    exit 1
  fi
  exec bash "$NRL_LOG_DIR/job.sh" worker
}

# Sourced (`source job.sbatch`: a test, or a person trying one of its functions), the script
# defines its values and functions and runs nothing.
[[ ${BASH_SOURCE[0]-$0} == "$0" ]] || return 0
case ${1:-} in
  lepton) lepton_main ;;
  head | worker) node_main "$1" ;;
  *) echo "usage: $0 lepton (as a worker of a Lepton job)" >&2; exit 2 ;;
esac
