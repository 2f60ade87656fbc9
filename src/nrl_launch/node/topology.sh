# What NeMo RL's placement reads about a node (nemo_rl/distributed/virtual_cluster.py and
# numa_utils.py on NeMo RL main), with the key names and value rules of main's ray.sub. Needs
# NRL_NODE_INDEX, NRL_NODES, NRL_DEDICATED_HEAD, NRL_LOG_DIR; run after the setup command (which may put a site's
# nvidia-smi on PATH or export Slurm's topology address).
# ---- Topology: the Ray resources NeMo RL sorts GPUs by, and its GPU -> CPU map ----

# The node's NVLink domain: its fabric's ClusterUUID (one per GB200 NVL72 rack), from the first
# GPU's Fabric section of `nvidia-smi -q`. Unlike ray.sub, a fabric that is not up (State other
# than Completed, Status other than Success), "N/A" (PCIe GPUs) and the all-zero UUID that HGX
# boards report are no domain: with them every HGX node would look like one NVLink domain.
nvlink_domain() {
  command -v nvidia-smi >/dev/null || return 0
  nvidia-smi -q 2>/dev/null | awk -F' *: *' '
    $1 ~ /^ *Fabric$/ { fabric = 1; state = ""; status = ""; next }
    fabric && $1 ~ /^ *State$/ { state = $2 }
    fabric && $1 ~ /^ *Status$/ { status = $2 }
    fabric && $1 ~ /^ *ClusterUUID$/ {
      if (state == "Completed" && status == "Success" && $2 ~ /^[0-9a-fA-F-]+$/ && $2 !~ /^[0-]+$/)
        print $2
      exit
    }'
}

# ray.sub's topo_rank of a Slurm topology address in block.node form (topology/block):
# the block's digits x 10^10 + the node's digits. Empty when the address has no digits there.
block_rank() {
  local block=${1%%.*} node=${1##*.}
  block=${block//[!0-9]/} node=${node//[!0-9]/}
  [[ -n $block && -n $node ]] || return 0
  printf '%s' $((10#$block * 10000000000 + 10#$node))
}

# This node's topo_rank. With Slurm's block.node addresses, ray.sub's rule, unless it gives two
# nodes of the job one rank (its own comment: "rack-A1" and "rack-B1" both give 1) or gives 0
# (Ray drops a zero resource): then, with a warning, ranks by block (in the order the blocks'
# names sort) and by the node's place in the job, which keeps a block's nodes together. Each
# node writes its address to topology/<K> and reads every node's: the same answer everywhere.
# Without block addresses: the head 1 and node K K+1, as ray.sub gives its head and workers.
# A dedicated head has no topo_rank: only the GPU nodes (from node $NRL_DEDICATED_HEAD) count.
topo_rank() {
  local addr=${SLURM_TOPOLOGY_ADDR:-} dir=$NRL_LOG_DIR/topology k rank first=$NRL_DEDICATED_HEAD
  if [[ ${SLURM_TOPOLOGY_ADDR_PATTERN:-} != block.node || -z $addr ]]; then
    printf '%s' $((NRL_NODE_INDEX + 1))
    return
  fi
  mkdir -p -- "$dir"
  printf '%s\n' "$addr" >"$dir/.$NRL_NODE_INDEX"
  mv -f -- "$dir/.$NRL_NODE_INDEX" "$dir/$NRL_NODE_INDEX"
  # Every node's step has started within a moment of this one; bounded all the same.
  local deadline=$((SECONDS + 60)) addrs=()
  until (($(find "$dir" -maxdepth 1 -name '[0-9]*' | wc -l) >= NRL_NODES - first)); do
    [[ ! -e $NRL_LOG_DIR/ENDED ]] || return 1
    if ((SECONDS >= deadline)); then
      log >&2 "topology: not every node wrote its Slurm topology address within 60s; topo_rank from the node's place in the job"
      printf '%s' $((NRL_NODE_INDEX + 1))
      return
    fi
    nap 0.1
  done
  for ((k = first; k < NRL_NODES; k++)); do
    addrs[k]=$(<"$dir/$k")
  done
  local -A seen=()
  local clash=""
  for k in "${!addrs[@]}"; do
    rank=$(block_rank "${addrs[k]}")
    if [[ -z $rank || $rank == 0 || -n ${seen[$rank]:-} ]]; then
      clash="${addrs[k]}"
      break
    fi
    seen[$rank]=1
  done
  if [[ -z $clash ]]; then
    block_rank "$addr"
    return
  fi
  ((NRL_NODE_INDEX != first)) ||
    log >&2 "warning: topology: ray.sub's topo_rank rule gives ${clash} no rank of its own (digits only); ranking by block name and node order instead"
  local blocks block_index
  blocks=$(printf '%s\n' "${addrs[@]%%.*}" | LC_ALL=C sort -u)
  block_index=$(grep -nxF -- "${addr%%.*}" <<<"$blocks" | cut -d: -f1)
  printf '%s' $((block_index * 10000000000 + NRL_NODE_INDEX + 1))
}

# The Ray resources NeMo RL's placement reads, as JSON members to add to --resources.
topology_resources() {
  local domain rank
  domain=$(nvlink_domain)
  rank=$(topo_rank) || return 1
  [[ -z $domain ]] || printf ', "nvlink_domain_%s": 1' "$domain"
  printf ', "topo_rank": %s' "$rank"
}

# NRL_GPU_CPU_AFFINITY_FILE: one "<GPU index>:<CPU list>" line per GPU, the CPUs of the GPU's
# NUMA node, which NeMo RL's workers bind to (numa_utils.py). The NUMA node is nvidia-smi topo
# -m's "NUMA Affinity" column (its CPU Affinity column is empty for some GPUs on GB200), the
# first one of a list; its CPUs are the kernel's. Empty when there is no nvidia-smi.
write_gpu_cpu_affinity() {
  local file=$1 gpu numa cpus
  : >"$file"
  command -v nvidia-smi >/dev/null || return 0
  while read -r gpu numa; do
    cpus=$(cat "/sys/devices/system/node/node$numa/cpulist" 2>/dev/null) || continue
    [[ -z $cpus ]] || printf '%s:%s\n' "$gpu" "$cpus" >>"$file"
  done < <(nvidia-smi topo -m 2>/dev/null | awk '/^GPU[0-9]+[ \t]/ {
    gpu = $1; sub(/^GPU/, "", gpu); numa = $(NF - 1); sub(/[,-].*/, "", numa)
    if (numa ~ /^[0-9]+$/) print gpu, numa
  }')
}
