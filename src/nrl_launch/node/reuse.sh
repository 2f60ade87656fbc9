# Container reuse (container.reuse; Slurm with pyxis): a node keeps the container a job of its
# user unpacked, and the user's next job on that node with the same image starts in it instead
# of unpacking the image again (enroot create: minutes for a NeMo RL image, on every node).
#
# How: the kept container is a directory in the user's enroot data dir on the node (0700, the
# user's own), named nrl-cache-<KEY>, where KEY names the image's exact content (image_key).
# When a job starts, each node renames the one of its image to this job's pyxis name
# (pyxis_nrl-<JOBID>): pyxis finds it and skips the import, and attach, the end-of-job removal
# and everything else see the job's own container, as without reuse. A rename is atomic: two
# jobs never share one (the second unpacks its own). The job runs it read-only
# (--container-readonly), so it ends as it began; when the job ends, each node renames it back
# and removes any other it kept: one image per user per node, the disk the job used while it ran.
# The sandbox never gets it: its own image, an unnamed container, no mount of the data dir.

# Version of the key's recipe: a change to image_key must never match a container kept by the
# old one.
NRL_REUSE_KEY_VERSION=1
# Seconds after its last change during which an image is "racy" (image_key): more than the
# coarsest timestamps of a filesystem an image may sit on (1 s).
NRL_REUSE_RACY_S=3

# Prints the key of image $1 as this node sees it (a .sqsh path: relative to the submit dir, as
# pyxis reads it), then " racy" when the image changed in the last few seconds. Fails for an
# image whose content no key can name: a registry tag, which can move (a digest, @sha256:...,
# names its content). The key of a file: its path, device, inode, size and mtime and ctime to
# the nanosecond (any write or replacement changes ctime, which no user can set back), and the
# bytes of its first and last MiB and of 16 blocks spread between them (a squashfs keeps its
# superblock at the start and its tables at the end). "racy": on a filesystem whose
# timestamps are coarse (1 s: ext3, some NFS and Lustre), an image written again within the
# same second keeps the same key: a container made from an image that new is not kept (git's
# "racy clean" rule).
image_key() {
  local img=$1 real stat size changed now offset i sum
  case $img in
    .* | /*) ;;
    *@sha256:*)
      printf 'v%s registry %s %s' "$NRL_REUSE_KEY_VERSION" "$img" "$(uname -m)" | sha256sum | cut -c1-32
      return 0
      ;;
    *) return 1 ;;
  esac
  real=$(readlink -e -- "$img") && [[ -f $real ]] || return 1
  stat=$(stat -L -c '%d %i %s %.9Y %.9Z' -- "$real") || return 1
  read -r _ _ size _ changed <<<"$stat"
  sum=$(
    {
      printf 'v%s file %s %s\n' "$NRL_REUSE_KEY_VERSION" "$real" "$stat"
      head -c 1048576 -- "$real" && tail -c 1048576 -- "$real" || exit 1
      for ((i = 1; i <= 16; i++)); do
        offset=$((size * i / 17))
        dd if="$real" bs=65536 count=1 skip="$offset" iflag=skip_bytes status=none || exit 1
      done
    } | sha256sum
  ) || return 1
  printf '%s' "${sum:0:32}"
  now=$(date +%s)
  if ((now - ${changed%.*} < NRL_REUSE_RACY_S)); then printf ' racy'; fi
  return 0
}

# The user's enroot data dir on this node, as enroot itself works it out (its config section:
# enroot.conf, its drop-ins, the environment). Fails when enroot is not there.
enroot_data_dir() {
  local enroot dir
  enroot=$(command -v enroot) || return 1
  dir=$(
    set +u
    # shellcheck disable=SC1090 # enroot's own script, read from where it is installed
    source <(sed -n '/^# ---- BEGIN CONFIG ----$/,/^# ----- END CONFIG -----$/p' "$enroot") >/dev/null 2>&1
    printf '%s' "${ENROOT_DATA_PATH:-}"
  ) || return 1
  # Only a dir of the user's that no one else can rename or plant an entry in, sticky or not
  # (mode or ACL): a kept container is run as the job's.
  [[ $dir == /* && -d $dir && -O $dir ]] || return 1
  ! replaceable "$dir" >/dev/null && ! shared "$dir" >/dev/null || return 1
  printf '%s' "$dir"
}

# The name pyxis gives this job's container: pyxis_NAME, or pyxis_JOBID_NAME under the plugin's
# container_scope=job (in the plugstack config, which every node reads).
pyxis_container_dir_name() {
  local config files=()
  config=$(scontrol show config 2>/dev/null | awk '$1 == "PlugStackConfig" { print $3 }') || config=""
  files=("${config:-/etc/slurm/plugstack.conf}" "$(dirname -- "${config:-/etc/slurm/x}")"/plugstack.conf.d/*)
  if grep -qs '^[^#]*pyxis.*container_scope=job' -- "${files[@]}"; then
    printf 'pyxis_%s_%s' "$SLURM_JOB_ID" "$NRL_CONTAINER_NAME"
  else
    printf 'pyxis_%s' "$NRL_CONTAINER_NAME"
  fi
}

# The batch step: before Ray's steps, every node takes the container it kept for this image.
claim_containers() {
  timeout 60 srun --overlap --nodes="$NRL_NODES" --ntasks="$NRL_NODES" --ntasks-per-node=1 \
    bash "$NRL_LOG_DIR/job.sbatch" claim-container \
    || log "could not look for kept containers on every node: those nodes unpack the image"
}

# On one node: the kept container of this job's image becomes the job's (pyxis then skips the
# import), and the key is noted (container-key.<node> in the log dir) for keep_container.
claim_container_node() {
  local node=${SLURMD_NODENAME:-$(hostname)} key data mine kept
  if ! key=$(image_key "$NRL_CONTAINER_IMAGE"); then
    log "$node: the image $NRL_CONTAINER_IMAGE is a registry tag or cannot be read: not reused (a tag can move; name a digest, @sha256:..., or a .sqsh)"
    return 0
  fi
  data=$(enroot_data_dir) || { log "$node: enroot's data dir is not this user's alone: no reuse"; return 0; }
  printf '%s\n' "$key" >"$NRL_LOG_DIR/container-key.$node"
  key=${key%% *}
  mine=$(pyxis_container_dir_name)
  # One of this job's name already there is an earlier job's (job ids start again when a
  # cluster is reset): never this image's for sure.
  if [[ -e $data/$mine ]]; then
    log "$node: removing $mine, which an earlier job left"
    enroot remove --force -- "$mine" >/dev/null 2>&1 || true
  fi
  # Only a container this user kept: a directory of theirs, not a link (no one else can put
  # one there now, as the data dir is theirs alone, but one may be left from when it was not).
  kept=$data/nrl-cache-$key
  if [[ -L $kept ]] || [[ -e $kept && ! ( -d $kept && -O $kept ) ]]; then
    log "$node: $kept is not a directory of this user's (a link, or another user's): not reused"
  elif mv -T -- "$kept" "$data/$mine" 2>/dev/null; then
    log "$node: reusing the container kept in $kept (no unpacking)"
  else
    log "$node: no container kept for this image ($kept): pyxis unpacks it"
  fi
}

# On one node, when the job ends (before remove_containers_node): this job's container is kept
# for the next job with the same image when it surely holds that image, untouched: it started
# here (the node's step ran in it), the image's key is the one it had when the job started (no
# change while the job ran), and the image was not written in the seconds before (racy).
# Any other container this user kept here is removed (one per user per node).
keep_container() {
  local node=${SLURMD_NODENAME:-$(hostname)} data mine key now old tmp
  data=$(enroot_data_dir) || return 0
  mine=$(pyxis_container_dir_name)
  [[ -d $data/$mine ]] || return 0
  [[ -f $NRL_LOG_DIR/container-key.$node ]] || return 0
  key=$(<"$NRL_LOG_DIR/container-key.$node")
  if [[ $key == *" racy" ]]; then
    log "$node: the image changed seconds before the job started: its container is not kept"
    return 0
  fi
  if ! now=$(image_key "$NRL_CONTAINER_IMAGE") || [[ ${now%% *} != "$key" ]]; then
    log "$node: the image changed while the job ran: its container is not kept"
    return 0
  fi
  if [[ ! -e $NRL_LOG_DIR/container-up.$node ]]; then
    log "$node: the job's step never ran in its container: not kept (it may be unpacked only in part)"
    return 0
  fi
  # Others first, each renamed away before it is removed: a job that claims one at this moment
  # gets it whole, or not at all. What an earlier removal left half done (its step timed out)
  # goes too: no job takes an nrl-evicted-* one.
  for old in "$data"/nrl-evicted-*; do
    if [[ -d $old ]]; then enroot remove --force -- "${old##*/}" >/dev/null 2>&1 || true; fi
  done
  for old in "$data"/nrl-cache-*; do
    [[ -d $old && $old != "$data/nrl-cache-$key" ]] || continue
    tmp=nrl-evicted-$$-${old##*/nrl-cache-}
    if mv -T -- "$old" "$data/$tmp" 2>/dev/null; then
      log "$node: removing the container kept for another image (${old##*/})"
      enroot remove --force -- "$tmp" >/dev/null 2>&1 || log "$node: could not remove $data/$tmp"
    fi
  done
  if mv -T -- "$data/$mine" "$data/nrl-cache-$key" 2>/dev/null; then
    touch -- "$data/nrl-cache-$key"
    log "$node: kept the job's container for the next job with this image: $data/nrl-cache-$key"
  fi
}
