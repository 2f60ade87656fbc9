# The probe job's steps (what each checks: the header), passed by probe_main to each node's bash.
# The header sets NRL_PROBE_DIRS, NRL_PROBE_HOST_DIRS, NRL_STEP_ARGS and NRL_PROBE_REPORT_DIR.
# One result line; the detail is last and kept on one line.
report() {
  local detail=${5:-}
  detail=${detail//$'\n'/ }
  printf 'nrl-probe|%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" "$detail"
}

# The job's environment and setup command, then Ray's version and path, in a subshell of its
# caller: the setup's output goes to stderr (this job's output), the answer to stdout.
probe_ray() {
  job_env
  if [[ -n $NRL_SETUP ]]; then
    set +u  # activate scripts often read unset variables
    eval "$NRL_SETUP" >&2 || { echo "setup-failed $?"; return 0; }
    set -u
  fi
  if ! command -v ray >/dev/null; then
    echo "no-ray $PATH"
    return 0
  fi
  echo "ray $(ray --version 2>&1 | tail -n 1) ($(command -v ray))"
}

# What the node itself has: these are not the container's to say.
probe_host() {
  local node=$1 count devices
  report "$node" host - ok "$(hostname)"
  devices=$(compgen -G '/dev/nvidia[0-9]*' | wc -l)
  # Slurm's answer first: it is what the job's Ray declares.
  if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
    count=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
    report "$node" gpus - ok "$count (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; $devices /dev/nvidia*)"
  elif [[ -n ${SLURM_JOB_GPUS:-} ]]; then
    count=$(tr ',' '\n' <<<"$SLURM_JOB_GPUS" | grep -c .)
    report "$node" gpus - ok "$count (SLURM_JOB_GPUS=$SLURM_JOB_GPUS; $devices /dev/nvidia*)"
  else
    report "$node" gpus - ok "$devices (/dev/nvidia*; Slurm names none)"
  fi
}

probe_info() {
  local node=$1 answer errors last
  if [[ $NRL_CONTAINER_RUNTIME == pyxis ]]; then
    # First: this node's container started (doctor reads pyxis's error where it is missing).
    report "$node" container - ok "$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"')"
  fi
  # The setup's own output is kept aside: its last line is what a failure says.
  errors=$(mktemp) || errors=/dev/null
  answer=$( (probe_ray) 2>"$errors" | tail -n 1)
  last=$(tail -n 1 "$errors")
  [[ $errors == /dev/null ]] || rm -f -- "$errors"
  case $answer in
    setup-failed*) report "$node" setup - failed "exit ${answer#setup-failed }${last:+: $last}" ;;
    no-ray*)
      report "$node" setup - ok ""
      report "$node" ray - failed "ray is not on PATH after the setup command (PATH=${answer#no-ray })"
      ;;
    *)
      report "$node" setup - ok ""
      report "$node" ray - ok "${answer#ray }"
      ;;
  esac
}

# One node's part of step $1; KEY DIR pairs follow for info (which writes), read and clean.
probe_node() {
  local step=$1 node=${SLURMD_NODENAME:-$(hostname)} key dir other error unseen
  shift
  case $step in
    host) probe_host "$node"; return 0 ;;
    info) probe_info "$node" ;;
  esac
  while (($# >= 2)); do
    key=$1 dir=$2
    shift 2
    case $step in
      info)
        if error=$( { printf '%s\n' "$node" >"$dir/$NRL_PROBE_PREFIX$node"; } 2>&1); then
          report "$node" write "$key" ok ""
        else
          report "$node" write "$key" failed "${error##*: }"
        fi
        ;;
      read)
        unseen=""
        for other in $NRL_NODE_LIST; do
          [[ $other != "$node" ]] || continue
          [[ $(cat -- "$dir/$NRL_PROBE_PREFIX$other" 2>/dev/null) == "$other" ]] || unseen+=" $other"
        done
        if [[ -n $unseen ]]; then
          report "$node" read "$key" failed "${unseen# }"
        else
          report "$node" read "$key" ok ""
        fi
        ;;
      clean) rm -f -- "$dir/$NRL_PROBE_PREFIX$node" ;;
    esac
  done
}

probe_main() {
  local nodes step code stderr=() out
  # The report; the job's own --output is /dev/null (see nrl_launch.doctor.probe.probe_request).
  out="$NRL_PROBE_REPORT_DIR/$NRL_PROBE_FILE_PREFIX$SLURM_JOB_ID.out"
  exec >>"$out" 2>&1 || exit 1
  mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
  NRL_NODE_LIST="${nodes[*]}"
  # Named after the job: doctor removes exactly these if the job is cancelled midway.
  NRL_PROBE_PREFIX="$NRL_PROBE_FILE_PREFIX$SLURM_JOB_ID-"
  # What the steps' code reads (probe_info: whether it runs in the job's container).
  export NRL_NODE_LIST NRL_PROBE_PREFIX NRL_SETUP NRL_CONTAINER_RUNTIME
  report - nodes - ok "$NRL_NODE_LIST"
  # The job's own container flags, with the log dir mounted: here the dir the report is in
  # (submit makes the job's log dir; doctor creates nothing).
  NRL_LOG_DIR=$NRL_PROBE_REPORT_DIR
  NRL_SUBMIT_DIR=$SLURM_SUBMIT_DIR
  set_container_args ""
  if [[ $NRL_CONTAINER_RUNTIME == pyxis ]]; then
    # pyxis says why a container did not start on the info step's stderr: one file per node
    # (%N, srun's name for the node; a % of the dir's own is written %%).
    stderr=(--error="${NRL_LOG_DIR//%/%%}/${NRL_PROBE_PREFIX}info-%N.err")
  fi
  # The node's bash gets these functions as its script: the batch script's own copy is in
  # slurmd's spool dir, which other nodes may not see.
  code="$(declare -f report job_env probe_ray probe_host probe_info probe_node)"'; probe_node "$@"'
  step=(srun "${NRL_STEP_ARGS[@]}" --nodes="$NRL_NODES" --ntasks="$NRL_NODES")
  "${step[@]}" bash -c "$code" nrl-probe host || report - step host failed "srun exited with $?"
  "${step[@]}" "${NRL_CONTAINER_ARGS[@]}" "${stderr[@]}" bash -c "$code" nrl-probe info \
    "${NRL_PROBE_DIRS[@]}" || report - step info failed "srun exited with $?"
  # A container that started on no node would not start for the read step either (pyxis may
  # unpack the whole image before it fails), and no file was written to clean.
  if [[ $NRL_CONTAINER_RUNTIME == pyxis ]] && ! grep -qs '^nrl-probe|[^|]*|container|' "$out"; then
    report - "done" - ok ""
    return 0
  fi
  "${step[@]}" "${NRL_CONTAINER_ARGS[@]}" bash -c "$code" nrl-probe read "${NRL_PROBE_DIRS[@]}" \
    || report - step read failed "srun exited with $?"
  "${step[@]}" bash -c "$code" nrl-probe clean "${NRL_PROBE_HOST_DIRS[@]}" \
    || report - step clean failed "srun exited with $?"
  report - "done" - ok ""
}

# Sourced (`source` of the probe: a test), it defines its values and functions and runs nothing.
[[ ${BASH_SOURCE[0]-$0} == "$0" ]] || return 0
probe_main
