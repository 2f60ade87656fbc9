# The copy of a laptop's checkout, made on the cluster (run by `sh -c`, from remote/sync.py):
# $1 the remote's workdir, $2 the copy's new dir name; the tar stream on stdin. Prints the
# copy's path (links resolved).
#
# The job runs this copy: no other user may be able to replace it, or what is in it, before
# then. As a log base is checked (trust.py), the workdir (or, where it does not exist yet, the
# deepest dir of it that does) and every dir above it must be writable by nobody else without
# the sticky bit, and the workdir itself by nobody else at all; and none may belong to another
# user (root aside), who could change that. A group counts as nobody else when it is the user's
# private group; a dir with an ACL whose mask grants group write counts as writable by others.
# Otherwise one line, `nrl-launch-workdir: WHY`, and exit 3. What is missing of the workdir is
# made 0700, dir by dir, never through a link; the copy's dir is new, 0700.
#
# The copy is made a git checkout (nothing committed) so that the cluster's submit freezes it
# into the job's log base as a local submit freezes the checkout (driver.snapshot).

set -u
set -f
workdir=$1
name=$2
me=$(id -u)
me_name=$(id -un 2>/dev/null || echo "")

refuse() {
  printf 'nrl-launch-workdir: %s\n' "$1"
  exit 3
}

# Whether group $1 (a gid) holds nobody but this user: a group of the user's name whose member
# list names no one else.
private_group() {
  entry=$(getent group "$1" 2>/dev/null) || return 1
  [ -n "$me_name" ] && [ "${entry%%:*}" = "$me_name" ] || return 1
  members=${entry##*:}
  [ -z "$members" ] || [ "$members" = "$me_name" ]
}

# Why another user could replace entries of dir $1 (`shared`: or create any in it, sticky or
# not); nothing when none can.
others_can_write() {
  # perms (drwxrwxrwt, + for an ACL), links, owner uid, gid: the dir's name is not read.
  # shellcheck disable=SC2046 # the fields of ls's line, split on purpose
  set -- "$1" "$2" $(ls -ldn -- "$1")
  dir=$1 shared=$2 perms=$3 uid=$5 gid=$6
  if [ "$uid" != 0 ] && [ "$uid" != "$me" ]; then
    echo "$dir belongs to another user (uid $uid)"
    return
  fi
  writers=""
  case $perms in
    ?????w*+) writers="the users its ACL names" ;;
    ????????w*) writers="every user" ;;
    ?????w*) private_group "$gid" || writers="group $gid" ;;
  esac
  [ -n "$writers" ] || return 0
  case $perms in
    ?????????[tT]*) [ "$shared" = no ] && return 0 ;;
  esac
  if [ "$shared" = yes ]; then
    echo "$dir is writable by $writers ($perms)"
  else
    echo "$dir is writable by $writers ($perms, no sticky bit)"
  fi
}

case $workdir in
  /*) ;;
  *) workdir=$PWD/$workdir ;;
esac
base=$workdir
while [ ! -e "$base" ] && [ ! -L "$base" ]; do base=$(dirname -- "$base"); done
real=$(cd -P -- "$base" 2>/dev/null && pwd -P) || refuse "$base is no directory you can enter"
[ "$base" = "$workdir" ] && shared=yes || shared=no
dir=$real
while :; do
  why=$(others_can_write "$dir" "$shared")
  [ -z "$why" ] || refuse "$why"
  [ "$dir" != / ] || break
  dir=$(dirname -- "$dir")
  shared=no
done

umask 077
dir=$real
rest=${workdir#"$base"}
IFS=/
for part in $rest; do
  case $part in
    '' | .) continue ;;
    ..) refuse "$workdir: a path without '..' is expected" ;;
  esac
  dir=$dir/$part
  mkdir -- "$dir" 2>/dev/null || { [ -d "$dir" ] && [ ! -L "$dir" ]; } || refuse "cannot make $dir"
done
unset IFS
cd -P -- "$dir" && mkdir -- "$name" && cd -- "$name" || exit 1
tar -x -f - --no-same-owner || exit 1
if ! { git -c init.defaultBranch=main init -q . && git add -A -f .; } >/dev/null 2>&1; then
  echo "nrl-launch: note: $PWD could not be made a git checkout (is git installed?)" >&2
fi
pwd -P
