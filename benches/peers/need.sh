# Sourced by the peer scripts: `need CMD...` installs each command that is missing from the
# distribution's package of the same name (as root, or through sudo); `time_all` checks and
# times the implementations a script lists.
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

# `time_all DIR EXPECTED SLOW`: checks that each command of the caller's `commands` (named
# in `names`) prints EXPECTED, then times each with hyperfine, RUNS runs (one for the names
# in SLOW, a list separated by `|`), into DIR/I.json for the I-th.
time_all() {
    local dir="$1" expected="$2" slow="$3" i got runs
    for i in "${!names[@]}"; do
        got="$(${commands[$i]})"
        if [ "$got" != "$expected" ]; then
            echo "${names[$i]} printed $got, not $expected" >&2
            exit 1
        fi
    done
    for i in "${!names[@]}"; do
        runs="$RUNS"
        case "|$slow|" in *"|${names[$i]}|"*) runs=1 ;; esac
        echo "timing ${names[$i]} ($runs runs)" >&2
        hyperfine --style none --runs "$runs" --warmup 0 --export-json "$dir/$i.json" \
            "${commands[$i]}" >/dev/null
    done
}
