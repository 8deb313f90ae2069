#!/usr/bin/env bash
# Shapes of code that Swift 6.0 cannot compile, checked on the sources and tests. The Raspberry Pi
# package is built with Debian trixie's Swift, 6.0.3 (make deb-arm64, make test-trixie), and the
# tree must build with it as with the newest Swift; these are the shapes the newest one accepts
# and 6.0.3 does not (its type checker, its Swift Testing, or an assertion in its compiler):
#  1. the value of `#expect(throws:)` or `#require(throws:)` (6.0's return nothing): use
#     `expectError(E.self) { … }` from TestSupport, which returns the error;
#  2. `try` in the right-hand side of a comparison inside `#expect(…)` or `#require(…)` (6.0
#     evaluates it in a non-throwing closure): one `try` first covers the whole condition;
#  3. string interpolation inside `@Test(…)`'s arguments (an assertion fails in 6.0.3's
#     compiler): build the string with `+`;
#  4. a chain of four or more `+` of arrays (an array literal, `Array(…)`, `.joined()`, a slice
#     among them; 6.0 gives up type-checking it): `Array([a, [0, 1], b].joined())`;
#  5. a slice (`.prefix(n)`, `.suffix(n)`, `.dropFirst(n)`, `.dropLast(n)`) or a `.joined()` in a
#     sum of two or more `+` (6.0 takes the sum for one of them): `a + Array(x.prefix(n)) + b`;
#  6. a noncopyable value (a `FileDescriptor`) released on one path only, `if made != nil { _ =
#     copy.release() }` (6.0.3's optimizer crashes in CopyPropagation): consume it on every path,
#     in a function that takes it `consuming`.
# Comments and the inside of string literals are not looked at. `make lint` runs it; make
# test-trixie builds everything with 6.0.3, which finds what this does not.
# Usage: scripts/check-swift60.sh [FILE.swift…]   (default: every .swift file under Sources and Tests)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
    mapfile -d '' files < <(find Sources Tests -name '*.swift' -print0 | LC_ALL=C sort -z)
    set -- "${files[@]}"
fi
awk '
function report(line, what) {
    printf "%s:%d: Swift 6.0 cannot compile %s\n", file, line, what > "/dev/stderr"
    failures++
}

# String literals: skip_string returns the index after the literal that opens at i (a quote);
# it sets interpolated when the literal holds \( … ); skip_interpolation skips to the ) that
# closes one, through nested parentheses and literals.
function skip_string(s, i, n,    c) {
    i++
    while (i <= n) {
        c = substr(s, i, 1)
        if (c == "\\") {
            if (substr(s, i + 1, 1) == "(") { interpolated = 1; i = skip_interpolation(s, i + 2, n); continue }
            i += 2; continue
        }
        if (c == "\"") return i + 1
        i++
    }
    return i
}
function skip_interpolation(s, i, n,    c, depth) {
    depth = 1
    while (i <= n) {
        c = substr(s, i, 1)
        if (c == "\"") { i = skip_string(s, i, n); continue }
        if (c == "(") depth++
        if (c == ")") { depth--; if (depth == 0) return i + 1 }
        i++
    }
    return i
}

# The line without comments; each string literal becomes "S", or "I" when it is interpolated; a
# multi-line string becomes "M" (its lines are skipped).
function clean(s,    out, i, n, c, j) {
    out = ""; n = length(s); i = 1
    while (i <= n) {
        if (in_block) {
            j = index(substr(s, i), "*/")
            if (j == 0) return out
            i += j + 1; in_block = 0; continue
        }
        if (in_multiline) {
            j = index(substr(s, i), "\"\"\"")
            if (j == 0) return out
            i += j + 2; in_multiline = 0; continue
        }
        c = substr(s, i, 1)
        if (substr(s, i, 3) == "\"\"\"") { out = out "\"M\""; in_multiline = 1; i += 3; continue }
        if (substr(s, i, 2) == "//") return out
        if (substr(s, i, 2) == "/*") { in_block = 1; i += 2; continue }
        if (c == "\"") {
            interpolated = 0
            i = skip_string(s, i, n)
            out = out (interpolated ? "\"I\"" : "\"S\"")
            continue
        }
        out = out c; i++
    }
    return out
}

# Arguments of #expect( #require( @Test( are collected up to their closing parenthesis.
function take_arguments(s, line,    i, n, c, rest) {
    n = length(s); i = 1
    while (i <= n) {
        c = substr(s, i, 1)
        if (capturing) {
            if (c == "(") depth++
            if (c == ")") {
                depth--
                if (depth == 0) { check_arguments(kind, arguments, start); capturing = 0; i++; continue }
            }
            arguments = arguments c; i++; continue
        }
        rest = substr(s, i)
        if (rest ~ /^#expect\(/ || rest ~ /^#require\(/ || rest ~ /^@Test\(/) {
            kind = substr(rest, 1, index(rest, "(") - 1)
            i += length(kind) + 1
            capturing = 1; depth = 1; arguments = ""; start = line
            continue
        }
        i++
    }
    if (capturing) arguments = arguments " "
}

function check_arguments(kind, a, line,    t, i, n, c, depth, operator) {
    if (kind == "@Test") {
        if (a ~ /"I"/) report(line, "string interpolation in @Test(...)'"'"'s arguments: build the string with +")
        return
    }
    t = a
    sub(/^[ \t]+/, "", t)
    # A first try (or throws:) covers the whole condition.
    if (t ~ /^(throws:|try[ \t])/) return
    # The condition: up to the first comma outside brackets, without closures (a try in one is
    # the closure'"'"'s own). The right-hand side of its first comparison is what 6.0 evaluates in a
    # non-throwing closure.
    n = length(t); depth = 0; operator = 0
    for (i = 1; i <= n; i++) {
        c = substr(t, i, 1)
        if (c == "(" || c == "[" || c == "{") depth++
        if (c == ")" || c == "]" || c == "}") depth--
        if (depth == 0 && c == ",") break
        if (depth == 0 && !operator && substr(t, i) ~ /^ (==|!=|<|>|<=|>=|===|!==|&&|\|\|) /) operator = i
        if (operator && c == "{") {
            # Skip the closure.
            inner = 1
            while (inner > 0 && ++i <= n) {
                c = substr(t, i, 1)
                if (c == "{") inner++
                if (c == "}") inner--
            }
            depth--
            continue
        }
        if (operator && i > operator && substr(t, i - 1, 5) ~ /^[^A-Za-z0-9_.]try[ \t(]/) {
            report(line, "a try in the right-hand side of a comparison in " kind "(...): put one try first, it covers the whole condition")
            return
        }
    }
}

# Statements, joined across lines while brackets or parentheses are open, or when a line ends
# with + or the next one begins with it.
function bracket_balance(s,    i, n, c, b) {
    b = 0; n = length(s)
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1)
        if (c == "(" || c == "[") b++
        if (c == ")" || c == "]") b--
    }
    return b
}

# Whether the [ at i opens an array literal (not a subscript): what comes before it is an
# operator, an opening bracket, a comma, a colon or nothing.
function opens_literal(s, i,    before) {
    before = substr(s, 1, i - 1)
    sub(/[ \t]+$/, "", before)
    return before == "" || before ~ /([-+=(\[{,:?!&|]|return|in)$/
}

# A sum ends at a comma or a closing bracket of its own level: one chain of + per level, and the
# text of that level (what is inside brackets left out) to tell a sum of arrays.
function end_sum(d) {
    if (pluses[d] >= 4 && !reported \
        && (literal[d] || level[d] ~ /\.joined\(\)|\.utf8|\.(prefix|suffix|dropFirst|dropLast)\(|(Array|\])\(/)) {
        report(sum_line[d], "a chain of " pluses[d] " + of arrays: Array([a, [0, 1], b].joined())")
        reported = 1
    }
    if (pluses[d] >= 2 && level[d] ~ /\.(prefix|suffix|dropFirst|dropLast|joined)\(\)([^.?]|$)/ && level[d] !~ /"[SI]"/ \
        && !reported) {
        report(sum_line[d], "a slice or a joined() in a sum of arrays (6.0 takes the sum for one of them): wrap it in Array(...)")
        reported = 1
    }
    pluses[d] = 0; literal[d] = 0; level[d] = ""; sum_line[d] = 0; reported = 0
}

function check_statement(s, line,    i, n, c, d, kind_at, k) {
    n = length(s); d = 0; reported = 0; k = 1
    pluses[0] = 0; literal[0] = 0; level[0] = ""; sum_line[0] = 0
    for (i = 1; i <= n; i++) {
        while (k < lines && i >= line_offset[k + 1]) k++
        line = line_number[k]
        if (!sum_line[d]) sum_line[d] = line
        c = substr(s, i, 1)
        if (c == "(" || c == "[" || c == "{") {
            if (c == "[" && opens_literal(s, i) && substr(s, 1, i - 1) ~ /\+[ \t]*$/) literal[d] = 1
            level[d] = level[d] c
            kind_at[d + 1] = (c == "[" && opens_literal(s, i)) ? "literal" : ""
            d++; pluses[d] = 0; literal[d] = 0; level[d] = ""; sum_line[d] = 0
            continue
        }
        if (c == ")" || c == "]" || c == "}") {
            end_sum(d)
            if (d > 0) d--
            level[d] = level[d] c
            if (c == "]" && kind_at[d + 1] == "literal" && substr(s, i + 1) ~ /^[ \t]*\+[ \t]/) literal[d] = 1
            continue
        }
        if (c == ",") { end_sum(d); continue }
        if (c != " " && level[d] ~ /^[ \t]*$/) sum_line[d] = line
        level[d] = level[d] c
        if (substr(s, i, 3) == " + ") pluses[d]++
    }
    end_sum(d)
}

function flush() {
    if (statement != "") check_statement(statement, statement_line)
    statement = ""; balance = 0; lines = 0
}

FNR == 1 {
    if (NR > 1) flush()
    file = FILENAME
    in_block = 0; in_multiline = 0; capturing = 0; previous = ""
}
{
    s = clean($0)
    take_arguments(s, FNR)
    # 1. The value of #expect(throws:) or #require(throws:).
    joined = previous " " s
    if (joined ~ /(=|return)[ \t]*(try[ \t]+)?(await[ \t]+)?#(expect|require)\(throws:/ \
        && s ~ /#(expect|require)\(throws:/)
        report(FNR, "the value of #expect(throws:) or #require(throws:), which return nothing in 6.0: use expectError(E.self) { ... } (TestSupport)")
    if (s ~ /[^ \t]/) previous = s
    # 6. A noncopyable value consumed on one path only (`if … { _ = x.release() }`).
    if (s ~ /(if|guard)[^{]*\{[ \t]*_[ \t]*=[ \t]*[A-Za-z_][A-Za-z_0-9.]*\.release\(\)[ \t]*\}/)
        report(FNR, "a noncopyable value released on one path only (the optimizer of 6.0.3 crashes in CopyPropagation): consume it on every path, in a function taking it consuming")
    # Statements for the + rules.
    trimmed = s
    sub(/^[ \t]+/, "", trimmed)
    if (statement != "" && balance <= 0 && statement !~ /[+=][ \t]*$/ && trimmed !~ /^\+[ \t]/) flush()
    if (statement == "") statement_line = FNR
    lines++; line_offset[lines] = length(statement) + 1; line_number[lines] = FNR
    statement = statement " " trimmed
    balance += bracket_balance(trimmed)
}
END {
    flush()
    if (failures) {
        printf "check-swift60: %d shape(s) Swift 6.0 (Debian trixie'"'"'s swiftlang) cannot compile — see the top of scripts/check-swift60.sh\n", failures > "/dev/stderr"
        exit 1
    }
}
' "$@"
