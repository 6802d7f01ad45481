# Shared by the maintainer scripts (inlined into each by .ci/debs, since a
# package's scripts cannot source files of another package).

# system_user NAME HOME: a system user and group NAME (no login, no home
# created), unless it exists. Users are kept on purge (files elsewhere may
# still belong to them); docs/how-to/install-debian.md says how to remove them.
system_user() {
  if ! getent passwd "$1" >/dev/null; then
    if command -v adduser >/dev/null; then
      adduser --system --group --home "$2" --no-create-home --shell /usr/sbin/nologin --quiet "$1"
    else
      useradd --system --user-group --home-dir "$2" --no-create-home --shell /usr/sbin/nologin "$1"
    fi
  fi
}

# join_group USER GROUP: when both exist.
join_group() {
  if getent passwd "$1" >/dev/null && getent group "$2" >/dev/null; then
    if command -v adduser >/dev/null; then adduser --quiet "$1" "$2"; else usermod -a -G "$2" "$1"; fi
  fi
}

reload_systemd() {
  if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
}
