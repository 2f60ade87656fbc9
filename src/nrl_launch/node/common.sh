# Helpers every script uses, a Ray cluster's or a plain command's (Ray's own: cluster.sh).
log() { printf '[nrl-launch %(%F %T)T] %s\n' -1 "$*"; }

# First writer wins: ENDED holds the first reason the job ended, never a later echo of it.
end_job() {
  ( set -o noclobber; printf '%s\n' "$*" >"$NRL_LOG_DIR/ENDED" ) 2>/dev/null || true
}

# Where the driver (or command, or an attached shell) runs: the snapshot's copy of its dir
# (driver.snapshot), else driver.workdir, else the container's workdir (where pyxis starts the
# step), else the dir the job was submitted from.
driver_workdir() { printf '%s' "${NRL_SNAPSHOT_WORKDIR:-${NRL_DRIVER_WORKDIR:-${NRL_CONTAINER_WORKDIR:-$NRL_SUBMIT_DIR}}}"; }

# Appends one phase to the timeline and rewrites timings.json (seconds since submission).
phase() {
  printf '%s %s\n' "$1" "$(date +%s.%N)" >>"$NRL_LOG_DIR/timeline"
  awk 'NR == 1 { t0 = $2; printf "{\"submitted_at\": %.3f, \"phases\": {", t0 }
       { printf "%s\"%s\": %.3f", (NR > 1 ? ", " : ""), $1, $2 - t0 }
       END { print "}}" }' "$NRL_LOG_DIR/timeline" >"$NRL_LOG_DIR/timings.json.$$"
  mv -f "$NRL_LOG_DIR/timings.json.$$" "$NRL_LOG_DIR/timings.json"
}

# Whether group $1 (a gid) holds nobody but this user: a group of the user's name with no
# other member (a user-private group).
own_group() {
  local entry name members me
  me=$(id -un)
  entry=$(getent group "$1") || return 1
  IFS=: read -r name _ _ members <<<"$entry"
  [[ $name == "$me" && ( -z $members || $members == "$me" ) ]]
}

# Prints why another user could rename or replace directory $1 (existing) or an entry in it:
# it, or a directory above it, is writable by them without the sticky bit, which keeps each
# entry its owner's. Fails when no one else can.
replaceable() {
  local dir mode gid group
  dir=$(cd -P -- "$1" 2>/dev/null && pwd) || return 1
  while true; do
    read -r mode gid < <(stat -c '%a %g' -- "$dir") || return 1
    mode=$((8#$mode))
    if ((!(mode & 8#1000))); then
      if ((mode & 8#0002)); then
        printf '%s is writable by every user (mode %04o)' "$dir" "$mode"
        return 0
      fi
      if ((mode & 8#0020)) && ! own_group "$gid"; then
        group=$(getent group "$gid" | cut -d: -f1) || true
        printf '%s is writable by group %s (mode %04o)' "$dir" "${group:-gid $gid}" "$mode"
        return 0
      fi
    fi
    [[ $dir != / ]] || return 1
    dir=${dir%/*}
    dir=${dir:-/}
  done
}

# Says (in the job's own output, as no log dir holds it) why the job cannot start, and ends it.
refuse_to_start() {
  log "nrl-launch refused to start the job: $*"
  exit 1
}

# Creates this run's log dir (NRL_LOG_DIR) with a copy of this script named $1, STARTED, the
# spec (spec.json, from NRL_JOB_SPEC, which submit passes to the job; none for a copy of this
# script run by hand), and last the timeline started at $2 (epoch seconds, when the job was
# submitted). The dir is new and the job's own (mode 0700): one that exists already, which
# another user may have made to catch the job's token and script, is refused, never reused; so
# is a place above it where another user could replace it.
start_log_dir() {
  local base=${NRL_LOG_DIR%/*} why
  mkdir -p -- "$base" "${NRL_CACHE_DIRS[@]}"
  if why=$(replaceable "$base"); then
    refuse_to_start "$why: another user could replace its log dir $NRL_LOG_DIR; choose a logs.base_dir only you can write"
  fi
  mkdir -m 700 -- "$NRL_LOG_DIR" 2>/dev/null ||
    refuse_to_start "its log dir $NRL_LOG_DIR exists already (made by someone else, or by an earlier job with this id): move it away and submit again"
  # Nodes and attach run this copy: the scheduler's own copy may be node-local.
  cp -- "$0" "$NRL_LOG_DIR/$1"
  # An empty marker whose mtime is the job's start, never written again: Ray's log sync
  # (sync_ray_logs) takes the sessions newer than it for this job's. (spec.json is missing from
  # a script run by hand, and the copy's name differs between kinds.)
  : >"$NRL_LOG_DIR/STARTED"
  if [[ -n ${NRL_JOB_SPEC-} ]]; then
    printf '%s\n' "$NRL_JOB_SPEC" >"$NRL_LOG_DIR/spec.json"
  fi
  # Written once: no step, Ray process, driver or sandbox started from here inherits it.
  unset NRL_JOB_SPEC
  printf 'submitted %s\n' "$2" >"$NRL_LOG_DIR/timeline"
  phase started
}

# Prints the first required secret missing from this node's environment (a site's export
# policy can strip it); fails when none is. Only the name is ever printed.
missing_secret() {
  local name
  for name in "${NRL_REQUIRED_SECRETS[@]}"; do
    if [[ -z ${!name:-} ]]; then
      printf '%s\n' "$name"
      return 0
    fi
  done
  return 1
}

# The job's environment (job_env, in the header) and setup command, in this shell (so that
# setup can activate a venv for Ray or the command), without `set -u` for setup: activate
# scripts often read unset variables.
enter_job_env() {
  job_env
  [[ -n $NRL_SETUP ]] || return 0
  set +u
  eval "$NRL_SETUP" || return 1
  set -u
}
