# Shared helpers for setup steps. Source it: . "$TDG_ROOT/scripts/lib/common.sh"

# as_root CMD...: run as root (directly or with sudo).
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# apt_install PKG...: install the Debian packages that are missing, once.
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing ${missing[*]}"
  apt_update || return 1
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# apt_update: refresh the package lists, at most once a day of setup runs.
# Only a refresh that fetched every index counts as done (apt-get update
# exits 0 when an index fails to download, unless --error-on=any): a failed
# one is retried by the next run instead of leaving stale lists for good.
apt_update() {
  local mark="$TDG_DEPS/.apt-updated"
  if [ -n "$(find "$mark" -mmin -1440 2>/dev/null)" ]; then
    return 0
  fi
  rm -f "$mark"
  if ! as_root apt-get update -qq --error-on=any; then
    echo "setup: apt-get update could not fetch every package list; check the network and /etc/apt/sources.list*, then rerun" >&2
    return 1
  fi
  touch "$mark"
}

# debian_mirror: the URI of the machine's own Debian archive, read from its
# apt configuration (so no host name is written into this repository).
debian_mirror() {
  local uri
  uri=$(grep -rhsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
        | grep -v security | grep -oE 'https?://[^ ]+/debian/?' | head -n1)
  [ -n "$uri" ] || { echo "setup: no Debian archive found in the apt configuration" >&2; return 1; }
  echo "${uri%/}"
}

# fetch_debian_source PKG SUITE DESTDIR: download PKG's Debian source package
# from SUITE (e.g. bookworm, trixie) into DESTDIR, using apt lists kept apart
# from the system's. Succeeds when at least the upstream tarball arrived (the
# mirror may 404 the .dsc / .debian.tar.xz; the orig tarball is what builds need).
fetch_debian_source() {
  local pkg=$1 suite=$2 dest=$3
  local state="$TDG_DEPS/apt-$suite"
  mkdir -p "$state/lists/partial" "$state/parts" "$dest"
  local mirror; mirror=$(debian_mirror)
  cat > "$state/parts/src.sources" <<SRC
Types: deb-src
URIs: $mirror
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  local opts=(-o "Dir::State::Lists=$state/lists" -o "Dir::Etc::SourceParts=$state/parts" -o "Dir::Etc::SourceList=/dev/null")
  # As apt_update: only a complete refresh is remembered; a failed one is
  # retried next run (the download below may still work from older lists).
  if [ -z "$(find "$state/.updated" -mmin -1440 2>/dev/null)" ]; then
    if apt-get "${opts[@]}" update -qq --error-on=any >/dev/null 2>&1; then
      touch "$state/.updated"
    else
      rm -f "$state/.updated"
      echo "setup: could not refresh the $suite source lists; trying the download anyway" >&2
    fi
  fi
  (cd "$dest" && apt-get "${opts[@]}" source --download-only "$pkg" >/dev/null 2>&1) || true
  if ! ls "$dest"/*.orig.tar.* >/dev/null 2>&1 && ! ls "$dest"/*.tar.* >/dev/null 2>&1; then
    echo "setup: could not download the $suite source of $pkg" >&2
    return 1
  fi
}
