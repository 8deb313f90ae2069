import Foundation
import TestSupport
import Testing

/// docs/ARCHITECTURE.md's thread table against the code, as EventsDocumentTests holds
/// docs/reference/events.md: every thread the sources start (the name given to POSIX's
/// `startThread`, `startEssentialThread` or `startDetachedThread`, which `top -H` shows) has a
/// row, and every row is a thread the sources start. The sources are read as text.
@Suite struct ThreadsDocumentTests {
    static let heading = "## Threads and queues"
    /// Where POSIX defines the calls and passes a name on: not a thread of its own.
    static let definitions = "Sources/POSIX/Threads.swift"

    /// Each line of a Swift file under Sources that is not a comment, with its file and line number.
    static func sourceLines() throws -> [(place: String, text: Substring)] {
        let sources = repositoryPath("Sources")
        let files = try FileManager.default.subpathsOfDirectory(atPath: sources)
        var lines: [(String, Substring)] = []
        for file in files.sorted() where file.hasSuffix(".swift") {
            let text = try String(contentsOfFile: sources + "/" + file, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.drop { $0 == " " }
                if code.hasPrefix("//") { continue }
                lines.append(("Sources/\(file):\(number + 1)", code))
            }
        }
        return lines
    }

    /// The threads the sources start: name → where.
    static func startedThreads() throws -> [String: [String]] {
        let named = try Regex(#"\bstart(Essential|Detached)?Thread\(\s*"([^"]*)""#)
        var threads: [String: [String]] = [:]
        for (place, line) in try sourceLines() {
            for match in line.matches(of: named) {
                let name = try #require(match.output[2].substring)
                threads[String(name), default: []].append(place)
            }
        }
        return threads
    }

    @Test func theThreadTableListsEveryThreadTheCodeStartsAndNoOther() throws {
        let table = try #require(
            markdownTable(in: repositoryText("docs/ARCHITECTURE.md"), under: Self.heading),
            "docs/ARCHITECTURE.md has no heading \(Self.heading)")
        let documented = table.map { $0.first ?? "" }
        #expect(Set(documented).count == documented.count, "a thread has two rows: \(documented)")
        let started = try Self.startedThreads()
        #expect(started.count >= 10, "found only \(started.keys.sorted()) — has the way threads are started changed?")
        for (name, places) in started.sorted(by: { $0.key < $1.key }) where !documented.contains(name) {
            Issue.record(
                "\(places.joined(separator: ", ")) starts the thread \"\(name)\", which docs/ARCHITECTURE.md's thread table does not list: add a row saying what it does and what it blocks on"
            )
        }
        for name in documented where started[name] == nil {
            Issue.record(
                "docs/ARCHITECTURE.md's thread table lists \"\(name)\", a thread no source starts: remove the row, or name the thread so in startThread"
            )
        }
    }

    /// A thread named by anything but a literal could not be held to the table.
    @Test func everyThreadIsNamedByALiteral() throws {
        let call = try Regex(#"\bstart(Essential|Detached)?Thread\(\s*[^"\s]"#)
        for (place, line) in try Self.sourceLines()
        where !place.hasPrefix(Self.definitions + ":") && !line.contains("func ") && line.contains(call) {
            Issue.record(
                "\(place) starts a thread whose name is not a string literal: name it with one, so the test of docs/ARCHITECTURE.md's thread table sees it"
            )
        }
    }
}
