# The batch step's opening, Ray's (batch_main) and a plain command's (plain_main): the secrets,
# NRL_SUBMIT_DIR, and this run's log dir, NRL_LOG_DIR (exported), named after NRL_RUN_NAME (the
# job's id); one that pyxis cannot mount ends the job here.
open_batch() {
  local base=$NRL_BASE_LOG_DIR
  load_secrets
  NRL_SUBMIT_DIR=$SLURM_SUBMIT_DIR
  NRL_RUN_NAME=$SLURM_JOB_ID
  [[ $base == /* ]] || base="$NRL_SUBMIT_DIR/$base"
  # A requeued job gets a log dir of its own: the first run's logs stay as they were.
  if ((${SLURM_RESTART_COUNT:-0} > 0)); then NRL_RUN_NAME+="-$SLURM_RESTART_COUNT"; fi
  # Exported where it is set: shellcheck takes a bare `export NRL_LOG_DIR` for an unquoted
  # use of the user's log dir (SC2090).
  export NRL_LOG_DIR="$base/$NRL_RUN_NAME-logs"
  if [[ $NRL_CONTAINER_RUNTIME == pyxis && $NRL_LOG_DIR == *[,:]* ]]; then
    log "the log dir $NRL_LOG_DIR holds ',' or ':', which pyxis cannot mount"
    exit 1
  fi
}

# Job $1 as `scontrol show job -o` shows it; empty where Slurm does not
# answer. A heterogeneous job (pools:) answers a line per component: this is the first's, the
# training cluster's, in which the batch step runs.
slurm_job() { scontrol show job -o "$1" 2>/dev/null | head -n 1 || true; }

# When the job was submitted (epoch seconds; now if its `scontrol show job -o` line $1 says not).
submitted_epoch() {
  local submitted
  submitted=$(sed -n 's/.* SubmitTime=\([^ ]*\).*/\1/p' <<<"$1")
  date -d "${submitted:-now}" +%s 2>/dev/null || date +%s
}
