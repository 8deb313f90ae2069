// Reading valgrind's callgrind output (its "callgrind format", version 1): the instructions
// executed (Ir), who called whom, and each call's inclusive cost. The bench reads it to say how
// many instructions per frame each part of the agent takes: a count that is the same from run
// to run, where CPU time on a shared machine moves by ±15 %.

import Foundation

struct CallgrindProfile {
    struct Function: Hashable {
        var object: String
        var name: String
    }

    struct FormatError: Error, CustomStringConvertible {
        var description: String
    }

    /// Instructions executed in the whole run, every thread.
    private(set) var total = 0
    /// For each function called, its callers and the inclusive cost of their calls (the callee
    /// and all it called).
    private(set) var callers: [Function: [Function: Int]] = [:]

    init(path: String) throws {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw FormatError(description: "cannot read the callgrind profile \(path)")
        }
        try self.init(text: text)
    }

    /// Parses the format: `ob=`/`fn=` set the current function, `cob=`/`cfn=` the callee of the
    /// next `calls=` line, whose following cost line is that call's inclusive cost (every other
    /// cost line is the current function's own, which the bench does not need). Names are compressed: `(12) name` the first
    /// time, `(12)` after.
    init(text: String) throws {
        var objects: [Substring: String] = [:]
        var functions: [Substring: String] = [:]
        func name(_ value: Substring, in table: inout [Substring: String]) -> String {
            guard value.first == "(", let close = value.firstIndex(of: ")") else { return String(value) }
            let id = value[value.index(after: value.startIndex)..<close]
            let rest = value[value.index(after: close)...].drop { $0 == " " }
            if !rest.isEmpty { table[id] = String(rest) }
            return table[id] ?? String(value)
        }
        var current = Function(object: "", name: "")
        var calleeObject: String?
        var callee: String?
        var callPending = false
        var sawSummary = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            guard let first = line.first else { continue }
            if first.isNumber || first == "+" || first == "-" || first == "*" {
                let fields = line.split(separator: " ")
                let cost = fields.count > 1 ? Int(fields[1]) ?? 0 : 0
                if callPending {
                    let called = Function(object: calleeObject ?? current.object, name: callee ?? "")
                    callers[called, default: [:]][current, default: 0] += cost
                    callPending = false
                    calleeObject = nil
                }
            } else if line.hasPrefix("ob=") {
                current.object = name(line.dropFirst(3), in: &objects)
            } else if line.hasPrefix("fn=") {
                current.name = name(line.dropFirst(3), in: &functions)
            } else if line.hasPrefix("cob=") {
                calleeObject = name(line.dropFirst(4), in: &objects)
            } else if line.hasPrefix("cfn=") {
                callee = name(line.dropFirst(4), in: &functions)
            } else if line.hasPrefix("calls=") {
                callPending = true
            } else if line.hasPrefix("summary:") || line.hasPrefix("totals:") {
                total = Int(line.split(separator: " ").last ?? "") ?? 0
                sawSummary = true
            }
        }
        guard sawSummary else { throw FormatError(description: "the callgrind profile has no summary line") }
    }

    /// Instructions in the functions `part` selects and in everything they called: the
    /// inclusive cost of every call into them from outside them (so a part's calls among its own
    /// functions, and recursion, count once; a thread's start routine is called from libc's).
    func cost(of part: (Function) -> Bool) -> Int {
        var cost = 0
        for (callee, calls) in callers where part(callee) {
            for (caller, c) in calls where !part(caller) { cost += c }
        }
        return cost
    }

    /// Instructions in the object files whose path contains `fragment` (a shared library) and in
    /// what they called (libc's memcpy on their behalf, their threads).
    func cost(ofObject fragment: String) -> Int { cost { $0.object.contains(fragment) } }

    /// Instructions in the functions whose (mangled) name contains any of `fragments`.
    func cost(ofFunctions fragments: [String]) -> Int {
        cost { f in fragments.contains { f.name.contains($0) } }
    }
}
