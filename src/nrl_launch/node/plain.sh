# A plain command's Slurm script (`run`, `pull`; no Ray; what it does: the header's comments).
# ---- Batch step: runs once, on node 0 ----
# scancel, the time limit, a requeue and preemption send SIGTERM to this script and to every
# task: say so, and let the tasks stop their command.
batch_stopped() {
  end_job "Slurm stopped the job (cancelled, time limit, requeue or preemption)"
  phase ended
  printf '143\n' >"$NRL_LOG_DIR/exit_code"
  exit 143
}

plain_main() {
  open_batch
  local shown
  shown=$(slurm_job "${SLURM_JOB_ID:-}")
  start_log_dir job.sbatch "$(submitted_epoch "$shown")"
  trap batch_stopped TERM
  export NRL_SUBMIT_DIR
  log "job $SLURM_JOB_ID: ${NRL_DRIVER[*]} on $NRL_NODES node(s), logs in $NRL_LOG_DIR"

  local step rc=0
  # No name: nothing attaches to a plain job, and pyxis removes an unnamed container itself.
  set_container_args ""
  # Every task's output, in one file: `nrl-launch logs` shows it (labelled by node if several).
  srun "${NRL_STEP_ARGS[@]}" "${NRL_CONTAINER_ARGS[@]}" bash "$NRL_LOG_DIR/job.sbatch" task \
    >>"$NRL_LOG_DIR/job.log" 2>&1 &
  step=$!
  # In the background: a SIGTERM reaches the trap at once, not when srun returns.
  wait "$step" || rc=$?
  # srun exits with the highest of its tasks' codes, and a task stopped because another failed
  # may exit higher (143): the job's code is the first failing node's (task_failed).
  if [[ -s $NRL_LOG_DIR/exit_code ]]; then
    rc=$(<"$NRL_LOG_DIR/exit_code")
    # Data, never code: bash would run a $(...) in it in arithmetic.
    [[ $rc =~ ^[0-9]+$ ]] || rc=1
  fi
  if ((rc == 0)); then
    end_job "the command exited with code 0 on $NRL_NODES node(s)"
  else
    # A task that failed has said how; this covers a step that failed before any task ran.
    end_job "the command's step ended with exit code $rc; see job.log"
  fi
  phase ended
  printf '%s\n' "$rc" >"$NRL_LOG_DIR/exit_code"
  log "job ended with exit code $rc: $(<"$NRL_LOG_DIR/ENDED")"
  forget_secrets
  exit "$rc"
}

# ---- Command step: one task on every node ----
# This node failed with exit code $1 for reason $2. The first node to fail names the job's
# reason and exit code (ENDED, then exit_code); srun then stops the others.
task_failed() {
  log "$2"
  if ( set -o noclobber; printf '%s\n' "$2" >"$NRL_LOG_DIR/ENDED" ) 2>/dev/null; then
    printf '%s\n' "$1" >"$NRL_LOG_DIR/exit_code"
  fi
  exit "$1"
}

task_main() {
  local rc=0 index=${SLURM_NODEID:-0} node
  node=${SLURMD_NODENAME:-$(hostname)}
  NRL_COMMAND_PID=""
  # scancel, the time limit, a requeue and preemption: ENDED first (Slurm's SIGKILL follows
  # after its KillWait), then the command gets that long to stop.
  trap 'end_job "Slurm stopped node $index ($node) (job cancelled, time limit, requeue or preemption)"; [[ -z $NRL_COMMAND_PID ]] || kill -TERM "$NRL_COMMAND_PID" 2>/dev/null || true; wait; exit 143' TERM
  enter_job_env || task_failed 1 "the setup command failed on node $index ($node); see job.log"
  local secret
  if secret=$(missing_secret); then
    task_failed 1 "the secret $secret is not in the job's environment on node $index ($node)"
  fi
  local workdir
  workdir=$(driver_workdir)
  cd -- "$workdir" 2>/dev/null || task_failed 1 "the workdir $workdir does not exist on node $index ($node)"
  # A missing program is said plainly, in ENDED and in job.log, not as bash's exit code 127.
  if ! command -v -- "${NRL_DRIVER[0]}" >/dev/null; then
    log "PATH=$PATH"
    task_failed 127 "${NRL_DRIVER[0]} is not installed on node $index ($node): no such command after the job's environment and setup command"
  fi
  # pull --force: the file the command replaces goes now (remove_first.sh, in a job with one).
  if declare -F remove_first >/dev/null; then remove_first; fi
  ((index > 0)) || phase command_started
  # In the background: a SIGTERM reaches the trap at once, not when the command returns.
  "${NRL_DRIVER[@]}" &
  NRL_COMMAND_PID=$!
  wait "$NRL_COMMAND_PID" || rc=$?
  NRL_COMMAND_PID=""
  ((index > 0)) || phase command_ended
  ((rc == 0)) || task_failed "$rc" "the command exited with code $rc on node $index ($node)"
}

# Sourced (`source job.sbatch`: a test, or a person trying one of its functions), the script
# defines its values and functions and runs nothing.
[[ ${BASH_SOURCE[0]-$0} == "$0" ]] || return 0
case ${1:-} in
  "") plain_main ;;
  task) task_main ;;
  *) echo "usage: $0 [task]" >&2; exit 2 ;;
esac
