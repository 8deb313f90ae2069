# Sourced: keeping a copy of the repository's sources where a SwiftPM build directory survives
# from one checkout to the next (CI's clean clones, scripts/trixie's build roots).

# build_tree REPO CACHE: brings CACHE/tree up to date with REPO's files (all but .git, .build,
# dist and var) and prints its path. A file whose content is unchanged is left as it is, with its
# inode and time, and one changed is written anew; what REPO no longer has is deleted (the build
# directory, .build, stays). So the SwiftPM build directories kept in CACHE/tree/.build rebuild
# only what changed, whichever checkout runs them: a clean clone builds in a minute or two
# instead of the quarter of an hour a build from nothing takes. Hold a lock while building there
# (use_build_tree in scripts/trixie/lib.sh, .ci/run).
build_tree() {
    local repo="$1" tree="$2/tree"
    mkdir -p "$tree"
    local listed="$2/tree.files"
    (cd "$repo" && find . \( -path ./.git -o -path ./.build -o -path ./dist -o -path ./var \) -prune \
        -o -type f -print | sed 's|^\./||' | LC_ALL=C sort) >"$listed"
    local file
    while IFS= read -r file; do
        if ! cmp -s "$repo/$file" "$tree/$file"; then
            mkdir -p "$(dirname "$tree/$file")"
            cp "$repo/$file" "$tree/$file.new"
            mv -f "$tree/$file.new" "$tree/$file"
        fi
        chmod --reference="$repo/$file" "$tree/$file"
    done <"$listed"
    (cd "$tree" && find . -path ./.build -prune -o \( -type f -o -type l \) -print | sed 's|^\./||' | LC_ALL=C sort) \
        | LC_ALL=C comm -23 - "$listed" | while IFS= read -r file; do rm -f "$tree/$file"; done
    find "$tree" -mindepth 1 -depth -type d -empty -not -path "$tree/.build" -not -path "$tree/.build/*" -delete
    echo "$tree"
}
