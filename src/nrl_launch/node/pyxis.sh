# A Ray cluster's named pyxis containers, removed when its job ends (Slurm, container.runtime pyxis).
# Named containers stay on each node's disk after the job (pyxis's default container_scope is
# global), and a later job of the same name would reuse one, old image and all. After Ray's
# steps end, one step outside the container removes this job's on every node, and any an
# earlier nrl-launch job left (one cancelled by scancel cannot run this).
remove_containers() {
  timeout 60 srun --overlap --nodes="$NRL_NODES" --ntasks="$NRL_NODES" --ntasks-per-node=1 \
    bash "$NRL_LOG_DIR/job.sbatch" remove-containers \
    || log "could not remove the job's containers on every node (see slurm-$SLURM_JOB_ID.out)"
  ((${NRL_HAS_POOLS:-0})) || return 0
  # And the pools' replicas' containers, on the job's second component.
  local nodes
  nodes=$(pool_nodes)
  [[ -n $nodes ]] || return 0
  timeout 60 srun --overlap --het-group=1 -w "$nodes" --ntasks-per-node=1 \
    --ntasks="$(tr ',' '\n' <<<"$nodes" | wc -l)" bash "$NRL_LOG_DIR/job.sbatch" remove-containers \
    || log "could not remove the pools' containers on every node (see slurm-$SLURM_JOB_ID.out)"
}

# On one node: this job's containers, under either container_scope (pyxis names them
# pyxis_NAME or pyxis_JOBID_NAME), and those of nrl-launch jobs Slurm no longer runs.
remove_containers_node() {
  local node=${SLURMD_NODENAME:-$(hostname)} name running="" names=()
  if ! command -v enroot >/dev/null; then
    log "enroot is not on PATH on $node: its containers stay"
    return 0
  fi
  # container.reuse: the job's container, when it can be, is kept for the next job (reuse.sh).
  if ((${NRL_CONTAINER_REUSE:-0})); then keep_container || true; fi
  # When squeue cannot answer, only this job's containers go.
  running=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ') || running=""
  while read -r name; do
    if [[ $name == "pyxis_$NRL_CONTAINER_NAME" || $name == pyxis_*_"$NRL_CONTAINER_NAME" ||
      $name == "pyxis_$NRL_CONTAINER_NAME"-pool-* || $name == pyxis_*_"$NRL_CONTAINER_NAME"-pool-* ]]; then
      names+=("$name")
    elif [[ -n $running && $name =~ ^pyxis_([0-9]+_)?nrl-([0-9]+)(-[0-9]+)?(-pool-[a-z0-9_]+-[0-9]+)?$ \
      && " $running" != *" ${BASH_REMATCH[2]} "* ]]; then
      names+=("$name")
    fi
  done < <(enroot list 2>/dev/null)
  [[ -n ${names[*]-} ]] || return 0
  log "removing containers on $node: ${names[*]}"
  enroot remove --force -- "${names[@]}"
}
