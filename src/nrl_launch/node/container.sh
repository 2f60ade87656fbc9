# srun's container arguments for one step, shared by every Slurm script: the same pyxis flags
# for Ray's steps, attach, and a plain command's step. Needs NRL_LOG_DIR and NRL_SUBMIT_DIR,
# and the container's values from the job's header (NRL_CONTAINER_*).
# Sets NRL_CONTAINER_ARGS for one step; $1 names the container, which attach re-enters (empty:
# no name, pyxis removes the container when the step ends). With $2 = attach, no image: the
# step enters the node's existing container, importing nothing.
set_container_args() {
  if [[ $NRL_CONTAINER_RUNTIME != pyxis ]]; then
    # No container: Ray, the driver or the command come from the environment the job runs in.
    NRL_CONTAINER_ARGS=()
    return 0
  fi
  local mounts=$NRL_CONTAINER_MOUNTS image=(--container-image="$NRL_CONTAINER_IMAGE") name=()
  local home=--no-container-mount-home
  [[ ${2:-} != attach ]] || image=()
  [[ -z $1 ]] || name=(--container-name="$1")
  # container.reuse: a container kept for the next job must end as it began (reuse.sh), whatever
  # steps ran in it: Ray's, and an attached shell's too.
  if [[ -n $1 ]] && ((${NRL_CONTAINER_REUSE:-0})); then name+=(--container-readonly); fi
  ((!NRL_CONTAINER_MOUNT_HOME)) || home=--container-mount-home
  # The log dir must be visible inside the container: every node reads and writes it.
  mounts="${mounts:+$mounts,}$NRL_LOG_DIR:$NRL_LOG_DIR"
  # So must the code frozen at submit (driver.snapshot), at the same path.
  [[ -z ${NRL_SNAPSHOT_DIR:-} ]] || mounts+=",$NRL_SNAPSHOT_DIR:$NRL_SNAPSHOT_DIR"
  NRL_CONTAINER_ARGS=(
    "${image[@]}"
    "--container-mounts=$mounts"
    --container-workdir="${NRL_CONTAINER_WORKDIR:-$NRL_SUBMIT_DIR}"
    "${name[@]}"
    "$home"
  )
}
