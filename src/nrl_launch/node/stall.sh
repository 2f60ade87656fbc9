# Stalls (driver.stall_min): a driver alive but printing nothing (a hung collective, a wedged
# vLLM worker: GPUs idle for hours while the job looks alive) ends the job as "stalled".

# Returns when the driver (process $1) exits or ENDED appears, as `watch` does; with a stall
# limit (NRL_DRIVER_STALL_S) also once ray-driver.log has not grown for that long, after
# writing ENDED with the cause (which names the last line and when it came). The log is read
# by bash itself, from where the last look stopped, and the looks wait with `nap`: no process
# per look.
watch_driver() {
  [[ -n ${NRL_DRIVER_STALL_S:-} ]] || { watch "$1"; return 0; }
  local log last now
  # The driver's step opens the log too, maybe not yet: whichever is first makes it (0600).
  : >>"$NRL_LOG_DIR/ray-driver.log"
  exec {log}<"$NRL_LOG_DIR/ray-driver.log" || { watch "$1"; return 0; }
  NRL_DRIVER_TAIL=""
  printf -v last '%(%s)T' -1
  while kill -0 "$1" 2>/dev/null && [[ ! -e $NRL_LOG_DIR/ENDED ]]; do
    printf -v now '%(%s)T' -1
    if driver_printed "$log"; then
      last=$now
    elif ((now - last >= NRL_DRIVER_STALL_S)); then
      end_job "$(stall_cause "$last")"
      break
    fi
    nap 1
  done
  exec {log}<&-
}

# Reads what the driver printed since the last look from fd $1, keeping its last 4 KiB in
# NRL_DRIVER_TAIL; fails if it printed nothing. Bytes (C locale): a cut never splits a read.
driver_printed() {
  local chunk printed=1
  while true; do
    chunk=""
    IFS= LC_ALL=C read -r -N 65536 -u "$1" chunk || true
    [[ -n $chunk ]] || break
    printed=0
    NRL_DRIVER_TAIL+=$chunk
    [[ -z ${NRL_DRIVER_TAIL:8192} ]] || NRL_DRIVER_TAIL=${NRL_DRIVER_TAIL: -4096}
    [[ -n ${chunk:65535} ]] || break # less than asked for: the end
  done
  return "$printed"
}

# The stalled cause for a driver whose last output came at $1 (epoch seconds): ENDED's first
# line, "stalled: ..." (retries take that prefix for a retryable end). The last line is the
# last non-empty one (of a progress bar's \r-separated updates, the last), without control
# characters, cut to 300 characters. Run in $(...): its locale changes stay there.
stall_cause() {
  local line="" rest=$NRL_DRIVER_TAIL at keep=${LC_ALL:-}
  while [[ -n $rest ]]; do
    line=${rest##*$'\n'}
    if [[ $rest == *$'\n'* ]]; then rest=${rest%$'\n'*}; else rest=""; fi
    line=${line%$'\r'}
    line=${line##*$'\r'}
    line=${line//$'\t'/ }
    # ASCII control characters only (C locale): a UTF-8 character's bytes stay.
    LC_ALL=C
    line=${line//[[:cntrl:]]/}
    LC_ALL=$keep
    [[ -z ${line// /} ]] || break
    line=""
  done
  [[ -z ${line:300} ]] || line="${line:0:300}..."
  printf -v at '%(%Y-%m-%d %H:%M:%S)T' "$1"
  if [[ -n $line ]]; then
    printf 'stalled: no driver output for %s min; the last line, at %s: %s' \
      "$NRL_DRIVER_STALL_MIN" "$at" "$line"
  else
    printf 'stalled: no driver output for %s min; it printed nothing since it started at %s' \
      "$NRL_DRIVER_STALL_MIN" "$at"
  fi
}
