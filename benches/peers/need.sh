# Sourced by the peer scripts: `need CMD...` installs each command that is missing from the
# distribution's package of the same name (as root, or through sudo).
need() {
    local missing=() c
    for c in "$@"; do
        command -v "$c" >/dev/null || missing+=("$c")
    done
    ((${#missing[@]})) || return 0
    echo "installing: ${missing[*]}" >&2
    if [ "$(id -u)" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
    else
        sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
    fi
}
