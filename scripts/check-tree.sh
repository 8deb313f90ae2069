#!/usr/bin/env bash
# What the tree as a whole keeps (docs/ARCHITECTURE.md, "Modules"):
# - no file under Sources or Tests over 600 lines (split it: a new file in the same module or
#   test target);
# - at most 45 pairs of places that share six or more lines, as the `duplicates` command counts
#   them over the whole tree, less those it marks boilerplate: by its README, what a boilerplate
#   pair shares is thin (punctuation, keywords) or a shape that recurs across a folder — a
#   struct's memberwise initializer beside another's, a list of stored properties — not logic
#   one piece of code could serve. Make one piece of code serve where the logic is the same.
#   Where `duplicates` is not installed, or cannot read the whole tree, this check says so and
#   is skipped, never failed.
# Usage: scripts/check-tree.sh   (`make lint` runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
fail() { echo "tree: $*" >&2; status=1; }

longest_file=600
most_pairs=45

# Every file under Sources and Tests: those git tracks and those it does not ignore, as they
# are now (outside a checkout, every file; `.build` is left out of the count of pairs).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files --cached --others --exclude-standard -- Sources Tests | LC_ALL=C sort -u)
else
    mapfile -t files < <(find Sources Tests -type f | LC_ALL=C sort)
fi
for file in "${files[@]}"; do
    [[ -f $file ]] || continue # deleted in the working tree
    lines=$(wc -l <"$file")
    if ((lines > longest_file)); then
        fail "$file has $lines lines, over $longest_file: split it (a new file in the same module or test target)"
    fi
done

if ! command -v duplicates >/dev/null 2>&1; then
    echo "tree: duplicates is not installed: the count of repeated places (at most $most_pairs pairs) was not checked" >&2
else
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        report=$(duplicates --most 200 --seconds 120)
    else
        # Outside a checkout duplicates reads every file below: the tree's own, without what a
        # build leaves (CI's copy of the clone keeps its .build beside them).
        copy=$(mktemp -d)
        trap 'rm -rf "$copy"' EXIT
        tar --exclude=./.build -cf - . | tar -C "$copy" -xf -
        report=$(cd "$copy" && duplicates --most 200 --seconds 120)
    fi
    first=$(head -n 1 <<<"$report")
    # "80 pairs of places (426 files read), each sharing … (77 by shape alone, 34 of those marked
    # boilerplate)", or "no duplicates …".
    if [[ $first =~ ^([0-9]+)\ pairs ]]; then
        all=${BASH_REMATCH[1]}
        boilerplate=0
        [[ $first =~ ([0-9]+)\ of\ those\ marked\ boilerplate ]] && boilerplate=${BASH_REMATCH[1]}
        pairs=$((all - boilerplate))
    elif [[ $first == "no duplicates"* ]]; then
        all=0 boilerplate=0 pairs=0
    else
        pairs=
    fi
    incomplete=$(grep '^incomplete:' <<<"$report" || true)
    if [[ -z $pairs ]]; then
        echo "tree: duplicates said \"$first\": the count of repeated places was not checked" >&2
    elif ((pairs > most_pairs)); then
        fail "duplicates lists $pairs pairs of repeated places (and $boilerplate of boilerplate), over $most_pairs: make one piece of code serve where the logic is the same (duplicates --most 200 lists them; duplicates --change, what a change wrote again)"
    elif [[ -n $incomplete ]]; then
        echo "tree: duplicates did not read the whole tree ($incomplete): $pairs pairs in what it read, the count was not checked" >&2
    else
        echo "tree: $pairs pairs of repeated places (at most $most_pairs), and $boilerplate of boilerplate"
    fi
fi
exit $status
