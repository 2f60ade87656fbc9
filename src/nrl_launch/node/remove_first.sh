# pull --force (enroot never overwrites): the old file (NRL_REMOVE_FIRST, in the header) goes on
# the node just before the command runs; only the script of a job with one carries this.
remove_first() { rm -f -- "$NRL_REMOVE_FIRST"; }
