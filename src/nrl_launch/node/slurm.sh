# The Slurm script's own part: the batch step on node 0, which starts the head and worker steps,
# and attach; then the mode dispatch (how Slurm, srun and attach run this script).
# Waits for the first of the steps $@ (their srun pids) to end; returns its exit code. `wait -n`
# alone misses a step that ended before it was called (srun refused at once, say).
first_to_end() {
  local pid
  for pid in "$@"; do
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; return; }
  done
  wait -n
}

# ---- Batch step: runs once, on node 0 ----
batch_main() {
  open_batch
  # The job's containers (one per node) carry its id: never one an earlier job left.
  export NRL_CONTAINER_NAME="nrl-$NRL_RUN_NAME"
  retry_check_previous
  local shown
  shown=$(slurm_job "${SLURM_JOB_ID:-}")
  # When Slurm ends the job: its steps (the driver's) count NeMo RL's save deadline from it.
  NRL_JOB_END_EPOCH=$(job_end_epoch "$shown")
  export NRL_JOB_END_EPOCH
  start_log_dir job.sbatch "$(submitted_epoch "$shown")"
  make_ray_token || { end_job "cannot write the job's Ray token into $NRL_LOG_DIR"; phase ended; retry_decide 1; exit 1; }
  # scancel, the time limit, a requeue and preemption send SIGTERM: say so, then let the
  # steps stop Ray.
  trap 'end_job "Slurm stopped the job (cancelled, time limit, requeue or preemption)"; phase ended; retry_decide 143; exit 143' TERM

  local nodes
  mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
  NRL_HEAD_NODE=${nodes[0]}
  # The head's address comes from Slurm's node name, resolved as the nodes resolve it (IPv4).
  NRL_HEAD_IP=$(getent ahostsv4 "$NRL_HEAD_NODE" | awk '{ print $1; exit }') || true
  NRL_HEAD_IP=${NRL_HEAD_IP:-$NRL_HEAD_NODE}
  NRL_NODE_LIST="${nodes[*]}"
  export NRL_HEAD_NODE NRL_HEAD_IP NRL_NODE_LIST NRL_SUBMIT_DIR
  local head=head
  ((!NRL_DEDICATED_HEAD)) || head="dedicated CPU head (its GPUs idle)"
  log "job $SLURM_JOB_ID: $NRL_NODES node(s), $head $NRL_HEAD_NODE ($NRL_HEAD_IP), logs in $NRL_LOG_DIR"
  write_attach_script "$SLURM_JOB_ID" job.sbatch

  local head_pid worker_pid=""
  if ((NRL_SANDBOX)); then
    # Before Ray: the sandboxes start while Ray comes up; the head waits for them.
    start_sandbox_step || { phase ended; exit 1; }
  fi
  if ((NRL_HAS_POOLS)); then
    # Before Ray too: the pools' replicas load their models while the training cluster starts.
    start_pools || { phase ended; retry_decide 1; exit 1; }
  fi
  if ((${NRL_CONTAINER_REUSE:-0})); then claim_containers; fi
  phase ray_steps
  set_container_args "$NRL_CONTAINER_NAME"
  srun "${NRL_STEP_ARGS[@]}" "${NRL_CONTAINER_ARGS[@]}" --nodes=1 --ntasks=1 -w "$NRL_HEAD_NODE" \
    bash "$NRL_LOG_DIR/job.sbatch" head &
  head_pid=$!
  if ((NRL_NODES > 1)); then
    # One batched step for all workers; one worker's exit ends the step at once.
    srun "${NRL_STEP_ARGS[@]}" "${NRL_CONTAINER_ARGS[@]}" --nodes=$((NRL_NODES - 1)) \
      --ntasks=$((NRL_NODES - 1)) --exclude="$NRL_HEAD_NODE" --kill-on-bad-exit=1 \
      bash "$NRL_LOG_DIR/job.sbatch" worker &
    worker_pid=$!
  fi

  # Sleep until the first step ends: no polling while the job runs.
  local rc=0
  while true; do
    rc=0
    first_to_end "$head_pid" ${worker_pid:+"$worker_pid"} ${NRL_SANDBOX_PID:+"$NRL_SANDBOX_PID"} \
      ${NRL_POOL_STEP_PIDS[@]+"${NRL_POOL_STEP_PIDS[@]}"} || rc=$?
    # A pool's replica that exits is routed around, unless it was its pool's last.
    if ((NRL_HAS_POOLS)) && kill -0 "$head_pid" 2>/dev/null && pool_step_ended; then continue; fi
    break
  done
  if ((NRL_SANDBOX)); then sandbox_step_ended "$rc" "$head_pid"; fi
  if kill -0 "$head_pid" 2>/dev/null; then
    # Workers also end when the job is already ending (ENDED exists, e.g. the driver is done
    # and the head is still stopping Ray): then the head's exit code decides, as always.
    if [[ ! -e $NRL_LOG_DIR/ENDED ]]; then
      end_job "a worker step ended (exit $rc) while the head was running; see ray-worker-*.log"
      log "a worker step ended first (exit $rc): stopping the head"
    fi
    # The head sees ENDED, stops the driver and Ray, and exits.
    rc=0
    end_child "$head_pid" 15 || rc=$?
  else
    # The head's own code, even if a worker that ended just before it was the first seen.
    rc=0
    wait "$head_pid" || rc=$?
    end_job "the head step ended with exit code $rc"
    # Workers see ENDED within a second and stop Ray; a worker stuck in its setup command
    # (or anything that does not poll) is stopped through srun.
    [[ -z $worker_pid ]] || end_child "$worker_pid" 5 || true
  fi
  if ((NRL_SANDBOX)); then stop_sandbox_step; fi
  if ((NRL_HAS_POOLS)); then stop_pool_steps; fi
  phase ended
  log "job ended with exit code $rc: $(<"$NRL_LOG_DIR/ENDED")"
  if [[ $NRL_CONTAINER_RUNTIME == pyxis ]]; then remove_containers; fi
  forget_secrets
  retry_decide "$rc"
  exit "$rc"
}

# ---- Attach (attach_main): from a login node, a shell or one command on node $1 ----
attach_on() {
  local nodes=() pty=() index=$1
  read -r -a nodes <<<"$NRL_NODE_LIST"
  (($2 == 0)) || pty=(--pty)
  shift 2
  set_container_args "$NRL_CONTAINER_NAME" attach
  # --overlap: the step shares the CPUs and GPUs that Ray's steps already hold.
  exec srun --overlap --jobid="$NRL_ATTACH_JOB" --nodes=1 --ntasks=1 -w "${nodes[index]}" \
    "${NRL_CONTAINER_ARGS[@]}" "${pty[@]}" bash "$NRL_LOG_DIR/job.sbatch" attach-node "$@"
}

# Sourced (`source job.sbatch`: a test, or a person trying one of its functions), the script
# defines its values and functions and runs nothing.
[[ ${BASH_SOURCE[0]-$0} == "$0" ]] || return 0
case ${1:-} in
  "") batch_main ;;
  head | worker) node_main "$1" ;;
  attach) shift; attach_main "$@" ;;
  attach-node) shift; attach_node "$@" ;;
  pool-replica) shift; pool_replica_main "$@" ;;
  remove-containers) remove_containers_node ;;
  claim-container) claim_container_node ;;
  *) echo "usage: $0 [head|worker|attach [K] [-- CMD...]]" >&2; exit 2 ;;
esac
