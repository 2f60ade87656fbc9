# Retries (submit --retries N): the batch step of every try decides, as it ends, whether another
# try can fix what ended it. Submit queues try 1 and N spares, each with
# --dependency=afternotok:<the try before>, so Slurm itself starts the next try when one fails,
# even when nobody is logged in; and NRL_RETRY="<try> <tries> <job id of the try before, or ->
# <seconds>" in each try's environment. This is the one place the causes are classified: the
# verdict goes to the log dir's RETRY ("<retry, done or stop>|<node to exclude>|<why>"), which
# the next try and `nrl-launch status` read; neither classifies again.

# Whether this job is one try of several.
retrying() {
  local try tries
  read -r try tries _ <<<"${NRL_RETRY:-}" || true
  [[ ${try:-} =~ ^[0-9]+$ && ${tries:-} =~ ^[0-9]+$ ]] && ((tries > 1))
}

# The verdict on a try that ended with exit code $1, ENDED saying $2 (its first line), Slurm
# calling it $3 (JobState, or empty), its driver having run $4 seconds (or empty: it never
# started); a driver that fails within $5 seconds is its own error. Prints
# "<verdict>|<node>|<why>".
retry_verdict() {
  local rc=$1 ended=$2 state=$3 ran=$4 within=$5 node="" verdict=retry why
  why=${ended:-the batch step ended with exit code $rc and no reason}
  if [[ $ended =~ ^driver\ exited\ with\ code\ ([0-9]+)$ ]]; then
    if ((BASH_REMATCH[1] == 0)); then
      verdict="done" why="the driver completed"
    elif ((${ran:-0} < within)); then
      verdict=stop why="the driver failed ${ran}s after it started (exit ${BASH_REMATCH[1]}), within the ${within}s (slurm.retry_min_runtime_s) in which a failure is its own, which another try would repeat"
    fi
  elif [[ $ended =~ ^Ray\ on\ node\ ([^ ]+)\ exited ||
    $ended =~ ^the\ Ray\ head\ on\ ([^ ]+)\ exited ||
    $ended =~ ^worker\ ([^ ]+)\ could\ not\ join ]]; then
    node=${BASH_REMATCH[1]}
  elif [[ $ended == stalled:* || $ended == "a worker step ended"* ]]; then
    :
  elif [[ $ended == *" stopped "*"(job cancelled, time limit, requeue or preemption)"* ||
    $ended == "Slurm stopped the job"* || -z $ended ]]; then
    # Which of these it was, Slurm says.
    case ${state%% *} in
      # A scancel reads COMPLETING by the time the batch step hears it (seen on 22.05).
      CANCELLED* | COMPLETING*) verdict=stop why="the try was cancelled (Slurm: ${state%% *})" ;;
      TIMEOUT*) why="the try reached its time limit" ;;
      NODE_FAIL*) why="Slurm lost a node of the try (NODE_FAIL)" ;;
      # Requeued (PreemptMode=REQUEUE), the try runs again under its own id and its spares
      # wait on: a verdict to retry changes nothing for them. Cancelled (PreemptMode=CANCEL),
      # Slurm starts the next try.
      PREEMPTED* | REQUEUE* | PENDING*) why="Slurm preempted the try" ;;
      "") [[ -n $ended ]] || verdict=stop ;;
      *) verdict=stop why="$why (Slurm: ${state%% *})" ;;
    esac
  elif ((rc == 0)); then
    verdict="done"
  else
    # A bring-up or config error (setup, secrets, Ray's version, ports, the log dir): every
    # try would hit it.
    verdict=stop
  fi
  printf '%s|%s|%s\n' "$verdict" "$node" "$why"
}

# The pending tries queued after this one, next first: Slurm's squeue lists each with
# "afternotok:<the try before>(unfulfilled)".
later_tries() {
  local id dep name job=$SLURM_JOB_ID
  local -A next=()
  while IFS='|' read -r id name dep; do
    [[ $name == "${SLURM_JOB_NAME:-}" && $dep =~ afternotok:([0-9]+) ]] || continue
    # A heterogeneous try (pools:) is listed once per component, "<id>+<offset>": it is <id>.
    next[${BASH_REMATCH[1]}]=${id%%+*}
  done < <(squeue -h --me -t PENDING -o '%i|%j|%E' 2>/dev/null)
  while [[ -n ${next[$job]:-} ]]; do
    job=${next[$job]}
    printf '%s\n' "$job"
  done
}

# A field of `scontrol show job -o` for job $1 ("(null)" read as empty).
job_field() {
  local value
  value=$(slurm_job "$1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p") || true
  [[ $value == "(null)" ]] || printf '%s' "$value"
}

# Whether $1 is this job's own (the job's uid owns it) and no symlink: a restart dir, or a file
# in one, that another user made or swapped in (a log base with the sticky bit lets them make
# entries) is never read.
own_entry() { [[ ! -L $1 && -O $1 ]]; }

# The verdict on the try whose log dir is $1 and job id $2, ended with exit code $3; a driver
# failing within $4 seconds is its own error. Its driver's run time is from its timeline. Files
# that are not the job's own are not read; every number is checked as one before bash's
# arithmetic sees it (which would run a $(...) in it).
verdict_of() {
  local dir=$1 ended="" state started="" finished="" ran=""
  ! own_entry "$dir/ENDED" || read -r ended <"$dir/ENDED" || true
  state=$(job_field "$2" JobState)
  if own_entry "$dir/timeline"; then
    read -r started finished < <(awk '$1 == "driver_started" { s = $2 } $1 == "driver_ended" { e = $2 }
      END { print s, e }' "$dir/timeline" 2>/dev/null) || true
  fi
  started=${started%%.*} finished=${finished%%.*}
  if [[ $started =~ ^[0-9]+$ ]]; then
    [[ $finished =~ ^[0-9]+$ ]] || finished=$EPOCHSECONDS
    ran=$((10#$finished - 10#$started))
  fi
  retry_verdict "$3" "$ended" "$state" "$ran" "$4"
}

# At the end of a try (exit code $1): the verdict, written to RETRY and acted on. Retryable:
# the next try will not get the node the cause names (nor any an earlier try excluded).
# Otherwise no further try will start: the pending ones are cancelled (afternotok would leave
# them pending for ever once this try ends well).
retry_decide() {
  retrying || return 0
  [[ ! -e $NRL_LOG_DIR/RETRY ]] || return 0
  local try tries within verdict node why later=()
  read -r try tries _ within <<<"$NRL_RETRY"
  [[ $within =~ ^[0-9]+$ ]] || within=600
  IFS='|' read -r verdict node why < <(verdict_of "$NRL_LOG_DIR" "$SLURM_JOB_ID" "$1" "$within")
  mapfile -t later < <(later_tries)
  if [[ $verdict == retry && -n ${later[0]:-} ]]; then
    local excluded
    excluded=$(job_field "$SLURM_JOB_ID" ExcNodeList)
    [[ -z $node ]] || excluded+="${excluded:+,}$node"
    if [[ -n $excluded ]]; then
      scontrol update JobId="${later[0]}" ExcNodeList="$excluded" ||
        log "could not keep try $((try + 1)) (job ${later[0]}) off $excluded"
    fi
    log "try $try/$tries failed ($why): try $((try + 1)) (job ${later[0]}) starts next${excluded:+, without $excluded}"
  elif [[ $verdict == retry ]]; then
    why+="; no tries left ($tries of $tries used)"
    log "try $try/$tries failed ($why)"
  else
    [[ $verdict == "done" ]] || why="not retried: $why"
    if [[ -n ${later[0]:-} ]]; then
      scancel "${later[@]}" || true
      log "try $try/$tries: ${why}; cancelled the tries after it: ${later[*]}"
    fi
  fi
  printf '%s|%s|%s\n' "$verdict" "$node" "$why" >"$NRL_LOG_DIR/RETRY.tmp"
  mv -f -- "$NRL_LOG_DIR/RETRY.tmp" "$NRL_LOG_DIR/RETRY"
}

# At the start of a try after the first, before anything starts: the try before may have had
# no chance to act (its first node died with it). Its verdict, if it wrote one, is read once
# more; a try it said not to retry ends here, without starting Ray, and says why in its output.
retry_check_previous() {
  retrying || return 0
  local try tries prev within dir verdict="" node why="" later=()
  read -r try tries prev within <<<"$NRL_RETRY"
  [[ $prev =~ ^[0-9]+$ ]] || return 0
  [[ $within =~ ^[0-9]+$ ]] || within=600
  local base=$NRL_BASE_LOG_DIR
  [[ $base == /* ]] || base="$SLURM_SUBMIT_DIR/$base"
  # Its newest run's log dir: a requeued try writes <id>-<N>-logs beside <id>-logs. Only the
  # job's own dirs count: one another user planted is never taken for it.
  local path run n=-1
  dir=$base/$prev-logs
  for path in "$base/$prev"-*-logs; do
    run=${path%-logs}
    run=${run##*-}
    if [[ $run =~ ^[0-9]+$ ]] && own_entry "$path" && ((10#$run > n)); then
      n=$((10#$run)) dir=$path
    fi
  done
  if [[ -e $dir || -L $dir ]] && ! own_entry "$dir"; then
    # Fails closed: no verdict, so this try runs.
    log "try $try/$tries: not reading $dir: it is not this user's own directory"
  elif own_entry "$dir/RETRY" && [[ -f $dir/RETRY ]]; then
    IFS='|' read -r verdict node why <"$dir/RETRY" || true
  elif own_entry "$dir/ENDED" && [[ -f $dir/ENDED ]]; then
    # It ended, but its batch step could not decide (its first node died, say): decided here,
    # by the same rules. (Slurm started this try, so that one failed.)
    IFS='|' read -r verdict node why < <(verdict_of "$dir" "$prev" 1 "$within")
    [[ $verdict == stop ]] && why="not retried: $why"
  fi
  if [[ $verdict == "done" || $verdict == stop ]]; then
    mapfile -t later < <(later_tries)
    [[ -z ${later[0]:-} ]] || scancel "${later[@]}" || true
    log "try $try/$tries does not run: try $((try - 1)) (job $prev) ${why:-said not to retry}"
    exit 0
  fi
  log "try $try/$tries: try $((try - 1)) (job $prev) ended: ${why:-it left no verdict (its first node may have died with it)}"
}
