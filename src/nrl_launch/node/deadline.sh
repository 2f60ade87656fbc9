# ---- The job's end, and NeMo RL's save before it (nemo_rl.save_by_job_end) ----
# NeMo RL saves once `checkpoint_must_save_by` has passed on a clock that its timer starts after
# NeMo RL's own setup (20-30 min at scale; its issue #3596). The job knows when Slurm ends it:
# the batch step notes that time (NRL_JOB_END_EPOCH, which its steps inherit) and, when the
# driver starts, the node passes the time left less the margin (NRL_SAVE_MARGIN_S) and makes
# the timer's deadline absolute with a start-up shim (save_by_shim_source, written next to the
# logs), whatever the setup takes.

# The epoch when Slurm ends this job, from `scontrol show job -o` output ($1: its EndTime,
# which follows a limit changed since the job started), else SLURM_JOB_END_TIME (which Slurm
# sets in the batch step's environment); prints nothing without one (UNLIMITED, Unknown).
job_end_epoch() {
  local end
  end=$(sed -n 's/.* EndTime=\([^ ]*\).*/\1/p' <<<"$1")
  if [[ $end =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+$ ]] && end=$(date -d "$end" +%s 2>/dev/null); then
    printf '%s' "$end"
  elif [[ ${SLURM_JOB_END_TIME:-} =~ ^[0-9]+$ ]]; then
    printf '%s' "$SLURM_JOB_END_TIME"
  fi
}

# DD:HH:MM:SS (NeMo RL's checkpoint_must_save_by) for $1 seconds.
ddhhmmss() {
  printf '%02d:%02d:%02d:%02d' $(($1 / 86400)) $(($1 % 86400 / 3600)) $(($1 % 3600 / 60)) $(($1 % 60))
}

# Sets NRL_SAVE_BY_ARGS (what run_driver appends to the driver's argv) and NRL_SAVE_BY_EPOCH,
# and writes the shim into $NRL_LOG_DIR/save-by/, when the job manages NeMo RL's deadline
# (NRL_SAVE_MARGIN_S) and knows its end; says what it set, or why it set nothing.
save_by_setup() {
  NRL_SAVE_BY_ARGS=() NRL_SAVE_BY_EPOCH=""
  [[ -n ${NRL_SAVE_MARGIN_S:-} ]] || return 0
  if [[ ! ${NRL_JOB_END_EPOCH:-} =~ ^[0-9]+$ ]]; then
    log "the job's end time is not known (no time limit): the driver gets no checkpoint_must_save_by"
    return 0
  fi
  local now left dir=$NRL_LOG_DIR/save-by
  now=$(date +%s)
  NRL_SAVE_BY_EPOCH=$((NRL_JOB_END_EPOCH - NRL_SAVE_MARGIN_S))
  left=$((NRL_SAVE_BY_EPOCH - now))
  if ((left < 0)); then
    log "the job ends in $((NRL_JOB_END_EPOCH - now)) s, within the ${NRL_SAVE_MARGIN_S} s save margin: NeMo RL saves at its first check"
    left=0
  fi
  NRL_SAVE_BY_ARGS=("++checkpointing.checkpoint_must_save_by=$(ddhhmmss "$left")")
  if { [[ -d $dir ]] || mkdir -m 700 -- "$dir"; } && save_by_shim_source >"$dir/sitecustomize.py"; then
    log "NeMo RL saves by $(date -d "@$NRL_SAVE_BY_EPOCH" '+%F %T %Z') (the job's end less ${NRL_SAVE_MARGIN_S} s): ${NRL_SAVE_BY_ARGS[0]}, and ${NRL_TIMER_CLASS:-its timer} counts from the job's end"
  else
    log "cannot write the save-deadline shim into $dir: the driver's deadline counts from when its timer starts"
    NRL_SAVE_BY_EPOCH=""
  fi
}

# In the driver's environment only (run_driver's subshell): the shim first on its PYTHONPATH.
save_by_env() {
  [[ -n $NRL_SAVE_BY_EPOCH ]] || return 0
  export NRL_SAVE_BY_EPOCH NRL_TIMER_CLASS="${NRL_TIMER_CLASS:-}"
  export PYTHONPATH="$NRL_LOG_DIR/save-by${PYTHONPATH:+:$PYTHONPATH}"
}
