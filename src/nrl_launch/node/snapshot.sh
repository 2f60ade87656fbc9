# The driver's environment for the code frozen at submit (driver.snapshot; none: unchanged).
# The copy's source roots come first on PYTHONPATH: an editable install in the checkout's env
# would otherwise import the checkout's code (Ray passes the driver's path on to its workers).
# The copy has no .venv: `uv run` uses the checkout's project env as it is (UV_NO_SYNC; a sync
# would build a new env, or point the user's env at the copy), unless the job sets its own.
snapshot_env() {
  [[ -n ${NRL_SNAPSHOT_WORKDIR:-} ]] || return 0
  export PYTHONPATH="$NRL_SNAPSHOT_PYTHONPATH${PYTHONPATH:+:$PYTHONPATH}"
  [[ -n $NRL_SNAPSHOT_VENV ]] || return 0
  export UV_PROJECT_ENVIRONMENT="${UV_PROJECT_ENVIRONMENT:-$NRL_SNAPSHOT_VENV}"
  export UV_NO_SYNC="${UV_NO_SYNC:-1}"
}
