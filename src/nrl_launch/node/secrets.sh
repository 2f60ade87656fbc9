# The job's secrets on its nodes, by name (NRL_SECRETS_FILE and NRL_KNOWN_SECRETS: the header).

# The secrets in NRL_SECRETS_FILE (NAME=VALUE, each ended by a NUL), those the job names only
# (required or optional), exported; a file that is not yours alone is not read. Read once, by
# the batch step as it starts, and removed as soon as no run of the job can need it again: at
# once when Slurm will never requeue the job (Requeue=0), else as the batch step ends, however
# it ends (the EXIT trap; a SIGTERM, which would end bash without it, exits through it).
load_secrets() {
  local entry name
  [[ -n $NRL_SECRETS_FILE && -f $NRL_SECRETS_FILE && ! -L $NRL_SECRETS_FILE ]] || return 0
  if [[ ! -O $NRL_SECRETS_FILE ]] || [[ $(stat -c %a -- "$NRL_SECRETS_FILE") != 600 ]]; then
    log "not reading the secrets file $NRL_SECRETS_FILE: it is not yours alone (mode 0600)"
    return 0
  fi
  while IFS= read -r -d '' entry; do
    for name in "${NRL_KNOWN_SECRETS[@]}"; do
      [[ ${entry%%=*} != "$name" ]] || export "${entry?}"
    done
  done <"$NRL_SECRETS_FILE"
  trap forget_secrets EXIT
  trap 'exit 143' TERM
  [[ $(slurm_job "${SLURM_JOB_ID:-}") != *" Requeue=0 "* ]] || rm -f -- "$NRL_SECRETS_FILE"
}

# Whether Slurm may run this job again, whose next run reads the secrets file once more: it may
# requeue it (Requeue=1) and it is not over for good. A requeue or a preemption reads PENDING,
# REQUEUED, PREEMPTED or COMPLETING as the batch step hears it, and so may a scancel
# (COMPLETING): such a file is left to `nrl-launch status`, which removes it once Slurm says the
# job is over, or has forgotten it.
may_run_again() {
  local shown
  shown=$(slurm_job "${SLURM_JOB_ID:-}")
  [[ $shown == *" Requeue=1 "* && $shown =~ \ JobState=([A-Z_]+) ]] || return 1
  case ${BASH_REMATCH[1]} in
    RUNNING | CANCELLED | TIMEOUT | DEADLINE | COMPLETED | FAILED | OUT_OF_MEMORY | BOOT_FAIL)
      return 1 ;;
  esac
}

# Removes the secrets file as the job ends: unless Slurm may run it again.
forget_secrets() {
  [[ -n $NRL_SECRETS_FILE && -e $NRL_SECRETS_FILE ]] || return 0
  may_run_again || rm -f -- "$NRL_SECRETS_FILE"
}
