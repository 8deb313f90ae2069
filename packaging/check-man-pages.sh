#!/usr/bin/env bash
# Checks that the hand-written man pages say what the program does, so they cannot drift:
#   vigil.8       has a `.SS "vigil NAME"` section for every command of `vigil --help` (and
#                 none for a command that does not exist), listing exactly the options of
#                 `vigil NAME --help` (but --help itself);
#   vigil.conf.5  has an entry for every setting `vigil check` knows (which include every
#                 setting of etc/vigil/vigil.conf), under its section, with the default
#                 `vigil check` reports, and no entry for a setting that does not exist.
# Usage: packaging/check-man-pages.sh VIGIL-BINARY [MAN8] [MAN5] [CONF]
# The man page and config arguments default to the ones in this repository (the tests
# pass altered copies to see the check fail). Exit 0 when all agree, 1 listing every
# disagreement.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
vigil="${1:?usage: $0 VIGIL-BINARY [MAN8] [MAN5] [CONF]}"
man8="${2:-$here/vigil.8}"
man5="${3:-$here/vigil.conf.5}"
conf="${4:-$here/../etc/vigil/vigil.conf}"
for f in "$man8" "$man5" "$conf"; do
    [ -r "$f" ] || { echo "check-man-pages: cannot read $f" >&2; exit 1; }
done
[ -x "$vigil" ] || { echo "check-man-pages: $vigil is not an executable vigil binary — build it first (make deb builds it)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
problems="$work/problems"
: >"$problems"
problem() { echo "$*" >>"$problems"; }

# Plain text of a roff fragment: font changes, \- \% \& and \(dq undone.
unroff() { sed -e 's/\\f[BIRP]//g; s/\\f(CW//g; s/\\-/-/g; s/\\%//g; s/\\&//g; s/\\(dq/"/g; s/\\e/\\/g'; }

# --- vigil.8 against --help ---------------------------------------------------------------
"$vigil" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}' | sort >"$work/commands"
[ -s "$work/commands" ] || problem "$vigil --help lists no commands — has its format changed? (this check reads the lines under 'commands:')"
# "vigil NAME" sections of the man page, and the options each lists as a .TP tag.
awk '
    /^\.SS "vigil [a-z]+"$/ { split($0, w, /[ "]+/); section = w[3]; print "section " section; next }
    /^\.S[SH] / { section = ""; next }
    section != "" && prev == ".TP" && /^\.BI? \\-\\-[a-z]/ { opt = $2; gsub(/\\/, "", opt); print "option " section " " opt }
    { prev = $0 }
' "$man8" >"$work/man8"
awk '$1 == "section" {print $2}' "$work/man8" | sort >"$work/man8-commands"
while read -r c; do
    grep -qx "$c" "$work/man8-commands" || problem "$(basename "$man8"): command '$c' (in vigil --help) has no section — add .SS \"vigil $c\" describing it and its options"
done <"$work/commands"
while read -r c; do
    grep -qx "$c" "$work/commands" || problem "$(basename "$man8"): section 'vigil $c' describes a command vigil --help does not list — remove it or add the command"
done <"$work/man8-commands"
while read -r c; do
    "$vigil" "$c" --help | awk '/^options:/ {on = 1; next} on && /^  --/ {print $1}' | grep -vx -- --help | sort >"$work/opts-help" || true
    awk -v c="$c" '$1 == "option" && $2 == c {print $3}' "$work/man8" | sort >"$work/opts-man"
    while read -r o; do
        problem "$(basename "$man8"): option $o of 'vigil $c' is not described — add .TP / .BI \\-\\-${o#--} under .SS \"vigil $c\""
    done < <(comm -23 "$work/opts-help" "$work/opts-man")
    while read -r o; do
        problem "$(basename "$man8"): option $o under 'vigil $c' is not an option of vigil $c --help — remove it"
    done < <(comm -13 "$work/opts-help" "$work/opts-man")
done <"$work/commands"

# --- vigil.conf.5 against vigil check and etc/vigil/vigil.conf -----------------------------
# Every setting with its default, as `vigil check` prints a configuration of empty groups
# (a file that sets nothing at all is refused):
#   section = {  /  name = value;  # default  /  };
echo 'camera = { };' >"$work/empty.conf"
"$vigil" check --config "$work/empty.conf" >"$work/check-out" 2>&1 || { cat "$work/check-out" >&2; echo "check-man-pages: vigil check failed on an empty configuration" >&2; exit 1; }
awk '
    /^[a-z_]+ = \{$/ { section = $1; next }
    /^\};$/ { section = ""; next }
    section != "" && /^  [a-z_]+ = / {
        line = $0; sub(/^  /, "", line); sub(/;  # default$/, "", line)
        name = line; sub(/ = .*/, "", name); value = line; sub(/^[a-z_]+ = /, "", value)
        print section "." name "\t" value
    }
' "$work/check-out" | sort >"$work/defaults"
[ -s "$work/defaults" ] || problem "vigil check printed no settings for an empty configuration — has its format changed?"
# The man page: .SS SECTION, then per setting .TP / .B NAME / ... / Default: \fBVALUE\fR
awk '
    /^\.SS [a-z_]+$/ { section = $2; next }
    /^\.S[HS] / { section = ""; next }
    section != "" && prev == ".TP" && /^\.B [a-z_]+$/ { key = section "." $2; seen[key] = 1; order[++n] = key }
    section != "" && key != "" && /^Default: / { v = $0; sub(/^Default: /, "", v); def[key] = v; key = "" }
    { prev = $0 }
    END { for (i = 1; i <= n; i++) print order[i] "\t" (order[i] in def ? def[order[i]] : "(no Default: line)") }
' "$man5" | unroff | sort >"$work/man5"
while IFS=$'\t' read -r key value; do
    documented="$(awk -F'\t' -v k="$key" '$1 == k {print $2}' "$work/man5")"
    if [ -z "$documented" ]; then
        problem "$(basename "$man5"): setting $key is not described — add .TP / .B ${key#*.} under .SS ${key%%.*}, ending in Default: \\fB$value\\fR"
    elif [ "$documented" != "$value" ]; then
        problem "$(basename "$man5"): $key says Default: $documented but vigil check says $value — correct the page (or the program)"
    fi
done <"$work/defaults"
while IFS=$'\t' read -r key _; do
    grep -q "^$key	" "$work/defaults" || problem "$(basename "$man5"): describes $key, which vigil check does not know — remove it or fix its name/section"
done <"$work/man5"
# The shipped config: every setting it sets is described (vigil check's list covers them
# when the config is valid; this catches a config and a page that agree on a key the
# program lost).
awk '
    /^[ \t]*#/ { next }
    /^[a-z_]+ = \{/ { section = $1; next }
    /^\};/ { section = ""; next }
    section != "" && /^[ \t]+[a-z_]+ = / { name = $1; print section "." name }
' "$conf" | sort -u >"$work/conf-keys"
[ -s "$work/conf-keys" ] || problem "$(basename "$conf"): no settings found — has its layout changed?"
while read -r key; do
    grep -q "^$key	" "$work/man5" || problem "$(basename "$man5"): setting $key of $(basename "$conf") is not described — add it under .SS ${key%%.*}"
done <"$work/conf-keys"

if [ -s "$problems" ]; then
    echo "check-man-pages: the man pages disagree with the program:" >&2
    sed 's/^/  /' "$problems" >&2
    exit 1
fi
echo "check-man-pages: vigil.8 covers $(wc -l <"$work/commands") commands; vigil.conf.5 covers $(wc -l <"$work/defaults") settings with their defaults"
