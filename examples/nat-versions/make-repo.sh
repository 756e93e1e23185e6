#!/bin/sh
# make-repo.sh DIR [VERSIONS.toml]: a git repository with one commit per version of
# VERSIONS.toml (default: versions.toml next to this script), oldest first, each
# tagged with its version (v1, v2...). Each commit holds the lab.toml found next to
# VERSIONS.toml and bisect.toml: the experiment with that commit's version table
# only, so the same file, read at each commit, measures that version. This is the
# firmware history `hoplab bisect run` walks (docs/versions.md).
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 DIR [VERSIONS.toml]" >&2
    exit 2
fi
dir=$1
src=${2:-$(dirname "$0")/versions.toml}
if [ ! -f "$src" ]; then
    echo "make-repo.sh: $src: no such file" >&2
    exit 2
fi
src=$(cd "$(dirname "$src")" && pwd)/$(basename "$src")
here=$(dirname "$src")
if [ -e "$dir" ]; then
    echo "make-repo.sh: $dir already exists; name a new directory" >&2
    exit 2
fi
mkdir -p "$dir"
git -C "$dir" init -q -b main
cp "$here/lab.toml" "$dir/lab.toml"
for v in $(sed -n 's/^\[matrix\.version\.\([A-Za-z0-9._-]*\)\]$/\1/p' "$src"); do
    # Everything before the first version table, then this version's table.
    awk -v want="[matrix.version.$v]" '
        /^\[matrix\.version\./ { seen = 1; keep = ($0 == want) }
        !seen || keep' "$src" > "$dir/bisect.toml"
    what=$(awk -v want="[matrix.version.$v]" '
        $0 == want { getline; sub(/^# */, ""); print; exit }' "$src")
    git -C "$dir" add -A
    git -C "$dir" -c user.name=hoplab -c user.email=hoplab@example.invalid \
        commit -q -m "$v: $what"
    git -C "$dir" tag "$v"
done
git -C "$dir" log --oneline --reverse
