# The job's secrets on its nodes, by name (NRL_SECRETS_FILE and NRL_KNOWN_SECRETS: the header).

# The secrets in NRL_SECRETS_FILE (NAME=VALUE, each ended by a NUL), those the job names only
# (required or optional), exported; a file that is not yours alone is not read.
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
}

# Removes the secrets file: the job is over.
forget_secrets() {
  [[ -z $NRL_SECRETS_FILE ]] || rm -f -- "$NRL_SECRETS_FILE"
}
