# Node 0's part where no scheduler step runs the head (local, Lepton): this shell starts the
# head step, waits for it, and records how the job ended (ENDED, exit_code).
NRL_HEAD_PID=""

# A stop (nrl-launch cancel, Lepton stopping the job) sends SIGTERM: the head stops the driver
# and Ray, then the job records how it ended. $1 says who stopped it. (A trap runs under
# `set -e`: nothing in it may fail.)
cancelled() {
  end_job "$1"
  if [[ -n $NRL_HEAD_PID ]]; then
    kill -TERM "$NRL_HEAD_PID" 2>/dev/null || true
    # The head's own stop is bounded: driver 30 s, then Ray 40 s.
    wait_bounded "$NRL_HEAD_PID" 120 || true
  fi
  if ((${NRL_HAS_POOLS:-0})); then stop_local_pools; fi
  phase ended
  printf '143\n' >"$NRL_LOG_DIR/exit_code"
  log "job cancelled"
  exit 143
}

# Runs the head step (this script again, as `head`) and ends the job with its exit code.
run_head_here() {
  local rc=0
  bash "$0" head &
  NRL_HEAD_PID=$!
  wait "$NRL_HEAD_PID" || rc=$?
  end_job "the head ended with exit code $rc"
  if ((${NRL_HAS_POOLS:-0})); then stop_local_pools; fi
  phase ended
  printf '%s\n' "$rc" >"$NRL_LOG_DIR/exit_code"
  log "job ended with exit code $rc: $(<"$NRL_LOG_DIR/ENDED")"
  exit "$rc"
}
