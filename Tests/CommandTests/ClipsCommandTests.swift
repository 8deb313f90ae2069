import Foundation
import Media
import Recorder
import Storage
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A storage directory for `vigil clips`, its clips named for camera `yard` in UTC, and a
/// configuration that names it.
struct ClipsDirectory {
    static let utc = TimeZone(identifier: "UTC")!
    /// 2026-11-30 11:04:05 UTC.
    static let created = Date(timeIntervalSince1970: 1_796_036_645)
    let dir: TemporaryDirectory
    let storage: DiskStorage
    let naming = ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "yard", timeZone: utc)
    let config: String

    init() throws {
        dir = try TemporaryDirectory("vigil-clips")
        storage = DiskStorage(root: dir.file("clips"))
        try storage.createRoot()
        config = dir.file("vigil.conf")
        try "camera = { name = \"yard\"; };\nstorage = { path = \"\(dir.file("clips"))\"; };\n".write(
            toFile: config, atomically: true, encoding: .utf8)
    }

    /// The events journal's path.
    var journal: String { dir.file("clips/events.jsonl") }
}

/// `vigil clips` on a storage directory whose journal a full disk damaged.
@Suite struct ClipsCommandTests {
    /// Runs `vigil ARGUMENTS` with TZ=UTC.
    func clips(_ arguments: String...) throws -> ToolResult { try clips(arguments) }

    func clips(_ arguments: [String]) throws -> ToolResult {
        var environment = ProcessInfo.processInfo.environment
        environment["TZ"] = "UTC"
        return try runTool(builtExecutable("vigil"), ["clips"] + arguments, environment: environment)
    }

    /// Three clips; the second one's line torn and the third's glued to it. Without
    /// `--rescan` every clip is listed and the journal is left as it is; `--rescan` rebuilds it.
    @Test func listsEveryClipOnDiskEvenWhenTheJournalIsDamaged() throws {
        let fixture = try ClipsDirectory()
        let (dir, storage, naming, utc, base) = (
            fixture.dir, fixture.storage, fixture.naming, ClipsDirectory.utc, ClipsDirectory.created
        )
        defer { dir.remove() }
        var records: [ClipRecord] = []
        for i in 0..<3 {
            let created = base.addingTimeInterval(Double(i) * 3600)
            let name = naming.relativePath(for: created)
            let summary = try TestClips.write(name, into: storage, created: created, gops: i + 1)
            records.append(
                ClipRecord(
                    file: name, camera: "yard", start: ClipRecord.timestamp(created, timeZone: utc),
                    end: ClipRecord.timestamp(created.addingTimeInterval(summary.duration.seconds), timeZone: utc),
                    cause: .motion, triggerTime: ClipRecord.timestamp(created, timeZone: utc), triggerSourceSeconds: 1,
                    preRollSeconds: 0,
                    durationSeconds: summary.duration.seconds, frames: summary.videoFrames,
                    audioFrames: summary.audioFrames, bytes: summary.bytes, peakScore: 0.25, part: 1))
        }
        let scratch = MemoryStorage()
        for record in records { try EventsJournal(storage: scratch).append(record) }
        let whole = try #require(scratch.contents(EventsJournal.name))
        let lineEnds = whole.indices.filter { whole[$0] == 10 }
        let damaged = Array(
            whole[...lineEnds[0]] + whole[(lineEnds[0] + 1)..<(lineEnds[0] + 60)] + whole[(lineEnds[1] + 1)...])
        let (journal, config) = (fixture.journal, fixture.config)
        #expect(FileManager.default.createFile(atPath: journal, contents: Data(damaged)))

        let listed = try clips("--config", config)
        #expect(listed.status == 0, "\(listed.stderr)")
        let rows = listed.stdout.split(separator: "\n").map(String.init)
        try #require(rows.count == 5, "\(listed.stdout)")
        #expect(rows.last == "3 clip(s) in \(dir.file("clips"))")
        #expect(rows[1].hasPrefix("2026-11-30T11:04:05.000Z") && rows[1].hasSuffix(records[0].file))
        #expect(rows[2].hasSuffix(records[2].file))
        #expect(rows[3].contains("rebuilt") && rows[3].hasSuffix(records[1].file + "  (not in the journal)"), "\(rows)")
        #expect(listed.stderr.contains("1 damaged line(s), first at line 2"), "\(listed.stderr)")
        #expect(listed.stderr.contains("vigil clips --rescan rebuilds it"), "\(listed.stderr)")
        #expect(FileManager.default.contents(atPath: journal) == Data(damaged))

        // While an agent records into the directory (holds its claim), a rescan is refused.
        do {
            let agent = try storage.claim()
            let refused = try clips("--config", config, "--rescan")
            #expect(refused.status == 75 && refused.stderr.contains("cannot rescan"), "\(refused.stderr)")
            #expect(FileManager.default.contents(atPath: journal) == Data(damaged))
            withExtendedLifetime(agent) {}
        }

        let rescanned = try clips("--config", config, "--rescan")
        #expect(rescanned.status == 0, "\(rescanned.stderr)")
        #expect(
            rescanned.stderr.contains(
                "rebuilt: 1 line(s) added (marked rebuilt), 1 damaged and 0 duplicate line(s) dropped"),
            "\(rescanned.stderr)")
        #expect(rescanned.stdout == listed.stdout.replacingOccurrences(of: "  (not in the journal)", with: ""))
        let (read, unreadable) = try EventsJournal(directory: dir.file("clips")).records()
        #expect(unreadable.isEmpty)
        #expect(read.map(\.file) == [records[0].file, records[2].file, records[1].file])
        #expect(read[2].rebuilt == true && read[2].frames == records[1].frames && read[2].bytes == records[1].bytes)

        #expect(
            rescanned.stderr.contains("the clip catalogue lists the 3 clip(s) on disk (3 written, 0 removed)"),
            "\(rescanned.stderr)")

        let again = try clips("--config", config, "--json")
        // Nothing wrong with the journal now, and the rescan made the catalogue it lists.
        #expect(again.status == 0 && again.stderr.isEmpty, "\(again.stderr)")
        #expect(again.stdout.split(separator: "\n").count == 3)
    }

    /// `events.jsonl` is a named pipe: `vigil clips` does not wait for ever opening it. It
    /// says what it is and lists the clips on disk; `--rescan` moves it aside (renamed, never
    /// deleted) and writes a journal in its place.
    @Test func aJournalThatIsANamedPipeDoesNotHangTheListing() throws {
        let fixture = try ClipsDirectory()
        let (dir, journal, config) = (fixture.dir, fixture.journal, fixture.config)
        defer { dir.remove() }
        let name = fixture.naming.relativePath(for: ClipsDirectory.created)
        try TestClips.write(name, into: fixture.storage, created: ClipsDirectory.created)
        #expect(mkfifo(journal, 0o644) == 0)
        var environment = ProcessInfo.processInfo.environment
        environment["TZ"] = "UTC"
        // `timeout` kills a listing stuck opening the pipe (SIGTERM would not end that wait).
        let listed = try runTool(
            "timeout", ["-s", "KILL", "60", builtExecutable("vigil"), "clips", "--config", config],
            environment: environment)
        #expect(listed.status == 0, "\(listed.status): \(listed.stderr)")
        #expect(
            listed.stderr.contains("\(journal): it is a named pipe (FIFO), not a regular file; refusing")
                && listed.stderr.contains("the clips on disk are listed"), "\(listed.stderr)")
        #expect(listed.stdout.contains(name + "  (not in the journal)"), "\(listed.stdout)")

        let rescanned = try runTool(
            "timeout", ["-s", "KILL", "60", builtExecutable("vigil"), "clips", "--config", config, "--rescan"],
            environment: environment)
        #expect(rescanned.status == 0, "\(rescanned.status): \(rescanned.stderr)")
        #expect(
            rescanned.stderr.contains("moved to \(dir.file("clips/events.jsonl.not-a-file"))"), "\(rescanned.stderr)")
        #expect(isNamedPipe(dir.file("clips/events.jsonl.not-a-file")))
        #expect(try EventsJournal(directory: dir.file("clips")).records().records.map(\.file) == [name])
    }

    /// A clip the agent moved aside as damaged (`NAME.mov.damaged`, its line marked damaged,
    /// or no line at all) is listed as damaged: it is on the disk and counted, but no player
    /// opens it.
    @Test func aDamagedClipIsListedAsDamaged() throws {
        let fixture = try ClipsDirectory()
        let (dir, storage, naming, utc, created) = (
            fixture.dir, fixture.storage, fixture.naming, ClipsDirectory.utc, ClipsDirectory.created
        )
        defer { dir.remove() }
        let good = naming.relativePath(for: created)
        let summary = try TestClips.write(good, into: storage, created: created)
        let damaged = naming.relativePath(for: created.addingTimeInterval(3600)) + ".damaged"
        #expect(FileManager.default.createFile(atPath: dir.file("clips/" + damaged), contents: Data(count: 5000)))
        let scratch = MemoryStorage()
        try EventsJournal(storage: scratch).append(
            ClipRecord(
                file: good, camera: "yard", start: ClipRecord.timestamp(created, timeZone: utc),
                end: ClipRecord.timestamp(created.addingTimeInterval(summary.duration.seconds), timeZone: utc),
                cause: .motion, triggerTime: ClipRecord.timestamp(created, timeZone: utc), triggerSourceSeconds: 1,
                preRollSeconds: 0, durationSeconds: summary.duration.seconds, frames: summary.videoFrames,
                audioFrames: summary.audioFrames, bytes: summary.bytes, peakScore: 0.25, part: 1))
        #expect(
            FileManager.default.createFile(
                atPath: fixture.journal, contents: Data(try #require(scratch.contents("events.jsonl")))))
        let config = fixture.config

        for arguments in [["--config", config], ["--config", config, "--rescan"], ["--config", config]] {
            let listed = try clips(arguments)
            #expect(listed.status == 0, "\(arguments): \(listed.stderr)")
            let rows = listed.stdout.split(separator: "\n").map(String.init)
            try #require(rows.count == 4, "\(arguments): \(listed.stdout)\(listed.stderr)")
            // (The journal lists oldest first, the catalogue — made by the rescan — newest first.)
            #expect(rows.contains { $0.hasSuffix(good) }, "\(rows)")
            #expect(
                rows.contains { $0.contains(" damaged ") && $0.contains(damaged + "  (damaged: no player opens it)") },
                "\(rows)")
            #expect(!listed.stderr.contains(damaged), "\(listed.stderr)")
        }
    }
}
