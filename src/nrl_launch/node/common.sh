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

# Prints the name of user $1 (a uid), or "uid $1" when it has none.
user_name() {
  local entry
  entry=$(getent passwd "$1") && printf '%s' "${entry%%:*}" || printf 'uid %s' "$1"
}

# Prints the name of group $1 (a gid), or "gid $1" when it has none.
group_name() {
  local entry
  entry=$(getent group "$1") && printf '%s' "${entry%%:*}" || printf 'gid %s' "$1"
}

# Prints who besides its owner and this user a POSIX ACL of $1 (owned by uid $2 and gid $3) lets
# write: a user or a group of others it names with write (whatever the mask: whoever may change
# the ACL may widen it), or, of a directory's default ACL, also its owning group and every user
# (they become the modes of what is made in it). Fails when none does. Fails closed: without
# getfacl (nodes may lack it), or when it fails, a path that `ls -ld` marks with "+" (it has an
# ACL beyond its mode) counts as writable by others.
acl_writers() {
  local path=$1 owner=$2 gid=$3 acl line kind id perms which me listing who=""
  if ! acl=$(getfacl --absolute-names --numeric --omit-header -- "$path" 2>/dev/null); then
    listing=$(LC_ALL=C ls -ld -- "$path" 2>/dev/null) || listing=""
    [[ ${listing:10:1} == + ]] || return 1
    printf 'others, as far as nrl-launch can tell (it has an ACL, which getfacl cannot read here)'
    return 0
  fi
  me=$(id -u)
  while IFS= read -r line; do
    which=ACL
    if [[ $line == default:* ]]; then which="default ACL" line=${line#default:}; fi
    IFS=: read -r kind id perms _ <<<"$line"
    [[ ${perms:1:1} == w ]] || continue
    case $kind:$id:$which in
      user:[0-9]*) [[ $id == "$owner" || $id == "$me" ]] || who="user $(user_name "$id")" ;;
      group:[0-9]*) own_group "$id" || who="group $(group_name "$id")" ;;
      "group::default ACL") own_group "$gid" || who="group $(group_name "$gid")" ;;
      "other::default ACL") who="every user" ;;
    esac
    if [[ -n $who ]]; then
      printf '%s through its %s' "$who" "$which"
      return 0
    fi
  done <<<"$acl"
  return 1
}

# Prints who besides its owner may write $1 (a path that exists), and its mode: every user or a
# group of others by its mode (under an ACL its group bits are the ACL's mask), or whom an ACL
# lets (acl_writers). Fails when no one else may.
writers() {
  local mode uid gid who
  read -r mode uid gid < <(stat -c '%a %u %g' -- "$1") || return 1
  mode=$((8#$mode))
  if ((mode & 8#0002)); then
    who="every user"
  elif ((mode & 8#0020)) && ! own_group "$gid"; then
    who="group $(group_name "$gid")"
  else
    who=$(acl_writers "$1" "$uid" "$gid") || return 1
  fi
  printf '%s (mode %04o)' "$who" "$mode"
}

# Prints why another user could rename or replace directory $1 (existing) or an entry in it:
# it, or a directory above it, is writable by them (writers) without the sticky bit, which keeps
# each entry its owner's. Fails when no one else can.
replaceable() {
  local dir mode who
  dir=$(cd -P -- "$1" 2>/dev/null && pwd) || return 1
  while true; do
    mode=$(stat -c %a -- "$dir") || return 1
    if ((!(8#$mode & 8#1000))) && who=$(writers "$dir"); then
      printf '%s is writable by %s' "$dir" "$who"
      return 0
    fi
    [[ $dir != / ]] || return 1
    dir=${dir%/*}
    dir=${dir:-/}
  done
}

# Prints why another user could create entries in directory $1 itself: it is writable by them
# (writers), sticky or not. Fails when no one else can.
shared() {
  local who
  who=$(writers "$1") || return 1
  printf '%s is writable by %s' "$1" "$who"
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
