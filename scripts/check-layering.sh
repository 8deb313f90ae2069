#!/usr/bin/env bash
# The layering rules of docs/ARCHITECTURE.md, checked on the sources (every file of a module,
# in its subfolders too), for every module of its module table — each row's kind says which
# rules hold, so no module is left out:
# - pure modules import no C module (Glibc, the C* system libraries) and no Foundation;
# - adapters reach C only with `internal import`, so no C type can appear in a public signature;
# - the agent, the web server, MQTT, uploads and the `vigil` command (`system_through_posix`
#   below) import no Glibc, no CLinux and no Foundation (which brings Glibc with it): the
#   operating system is POSIX's;
# - the agent imports no x264 type (it knows encoders through Media's VideoEncoder seam), no
#   Storage (it knows the disk as Recorder's ClipStorage) and no Analysis;
# - the "may import" column of ARCHITECTURE.md's module table is Package.swift's dependencies,
#   exactly (plus Glibc where a module calls the C library), every module imports only what its
#   row allows, every target of Package.swift (test helpers aside) has a row and every row a
#   target.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
fail() { echo "layering: $*" >&2; status=1; }

# The modules that reach the operating system through POSIX alone.
system_through_posix=(Agent Web MQTT Upload vigil)
# Every form of an import line: attributes, access levels, `import struct M.name`, `import M.Sub`.
import_line='^\s*(@[A-Za-z_]+ +)*((public|package|internal|fileprivate|private) +)?import +((typealias|struct|class|enum|protocol|let|var|func) +)?'

# Every Swift file of a module, subfolders included.
files() { find "Sources/$1" -name '*.swift' | sort; }
# `grep -n` over every file of a module, each hit prefixed with its file.
grep_module() {
    local module=$1 pattern=$2
    files "$module" | while IFS= read -r file; do
        grep -nE "$pattern" "$file" | sed "s|^|$file:|" || true
    done
}

# ARCHITECTURE.md's module table as "name kind", one a line.
table_kinds() {
    grep -E '^\| `[A-Za-z0-9-]+` \|' docs/ARCHITECTURE.md | sed -E 's/^\| `([A-Za-z0-9-]+)` \| *([^|]*[^ |]) *\|.*/\1 \2/'
}
while read -r module kind; do
    [[ -d Sources/$module ]] || continue
    case $kind in
        pure)
            while IFS= read -r hit; do
                fail "$hit — the pure module $module imports C or Foundation"
            done < <(grep_module "$module" \
                "$import_line(Glibc|Foundation\$|Foundation\\b[^E]|C[A-Z][A-Za-z0-9]*|POSIX|Dispatch)")
            ;;
        adapter)
            while IFS= read -r hit; do
                fail "$hit — an adapter imports a C module without \`internal import\`"
            done < <(grep_module "$module" '^\s*(@[A-Za-z_]+ +)*((public|package) +)?import +((typealias|struct|class|enum|protocol|let|var|func) +)?(Glibc|C[A-Z][A-Za-z0-9]*)(\.[A-Za-z0-9_.]+)?$')
            ;;
        library | executable | 'plugin (C++)') ;;
        *) fail "docs/ARCHITECTURE.md's module table gives $module the kind \"$kind\": pure, adapter, library, executable or plugin (C++)" ;;
    esac
done < <(table_kinds)
for module in "${system_through_posix[@]}"; do
    while IFS= read -r hit; do
        fail "$hit — $module reaches the operating system through POSIX alone: no Glibc, CLinux or Foundation (give POSIX the call it needs)"
    done < <(grep_module "$module" "$import_line(Glibc|SwiftGlibc|CLinux|Foundation)(\\.[A-Za-z0-9_.]+)?\$")
done
while IFS= read -r hit; do
    fail "$hit — the agent imports an encoder backend, the disk or the analysis"
done < <(grep_module Agent "$import_line(H264|CX264|Storage|Analysis)(\\.[A-Za-z0-9_.]+)?\$")

# Package.swift's targets as "name: dep dep …", one a line (comments dropped, calls joined).
package_targets() {
    sed 's|//.*||' Package.swift | tr '\n' ' ' |
        grep -oE '\.(target|executableTarget)\(\s*name: "[^"]+"(\s*,\s*dependencies: \[[^]]*\])?' |
        sed -E 's/^\.[a-zA-Z]+\(\s*name: "([^"]+)"(\s*,\s*dependencies: \[([^]]*)\])?/\1:\3/' |
        sed -E 's/[",]/ /g; s/  +/ /g; s/ +$//'
}
# ARCHITECTURE.md's module table as "name: allowed allowed …" ("—" is nothing).
table_rows() {
    grep -E '^\| `[A-Za-z0-9-]+` \|' docs/ARCHITECTURE.md |
        sed -E 's/^\| `([A-Za-z0-9-]+)` \|.*\| ([^|]*) \|$/\1:\2/' |
        sed -E 's/—//; s/,/ /g; s/  +/ /g; s/ +$//'
}
sorted_words() { tr ' ' '\n' | { grep -v '^$' || true; } | sort -u | tr '\n' ' ' | sed 's/ $//'; }

declare -A allowed
while IFS= read -r row; do allowed[${row%%:*}]=${row#*:}; done < <(table_rows)
while IFS= read -r target; do
    name=${target%%:*}
    [[ $name == TestSupport || $name == AgentTestSupport || $name == movie-writer-child || $name == y4m-feeder || $name == vigil-device-tests || $name == FakeLibcamera ]] &&
        continue
    if [[ -z ${allowed[$name]+set} ]]; then
        fail "Package.swift's target $name has no row in docs/ARCHITECTURE.md's module table"
        continue
    fi
    declared=$(echo "${target#*:}" | sorted_words)
    listed=$(echo "${allowed[$name]}" | sed -E 's/(^| )Glibc( |$)/ /' | sorted_words)
    if [[ $declared != "$listed" ]]; then
        fail "$name may import \"$listed\" in docs/ARCHITECTURE.md but depends on \"$declared\" in Package.swift"
    fi
    # Every import of a project module or C module is one the row allows (system modules
    # such as FoundationEssentials and Synchronization aside).
    [[ -d Sources/$name ]] || continue
    while IFS= read -r hit; do
        imported=$(echo "$hit" | sed -E 's/^[^:]*:[0-9]+://' | sed -E "s/$import_line//; s/[^A-Za-z0-9_].*//")
        case $imported in
            FoundationEssentials | Foundation | Synchronization | Dispatch | Testing | XCTest) continue ;;
        esac
        [[ " ${allowed[$name]} " == *" $imported "* ]] ||
            fail "$hit — $name imports $imported, which its row in docs/ARCHITECTURE.md does not allow"
    done < <(grep_module "$name" "$import_line[A-Za-z0-9_]+")
done < <(package_targets)
for name in "${!allowed[@]}"; do
    package_targets | grep -q "^$name:" || fail "docs/ARCHITECTURE.md's module table lists $name, which Package.swift has not"
done
exit $status
