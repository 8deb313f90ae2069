import Foundation
import Media
import Recorder
import Storage
import TestSupport
import Testing

/// `vigil clips` from the clip catalogue: a page at a time, newest first, the upload column
/// from the states the upload sink keeps there; without a catalogue (a directory an earlier
/// version wrote, never started by this one), from the events journal, said.
extension ClipsCommandTests {
    /// A clip's record for the catalogue, `minutes` after `ClipsDirectory.created`.
    static func record(_ fixture: ClipsDirectory, minutes: Int) -> ClipRecord {
        let created = ClipsDirectory.created.addingTimeInterval(Double(minutes) * 60)
        let start = ClipRecord.timestamp(created, timeZone: ClipsDirectory.utc)
        return ClipRecord(
            file: fixture.naming.relativePath(for: created), camera: "yard", start: start,
            end: ClipRecord.timestamp(created.addingTimeInterval(4), timeZone: ClipsDirectory.utc), cause: .motion,
            triggerTime: start, triggerSourceSeconds: 1, preRollSeconds: 1, durationSeconds: 4, frames: 60,
            audioFrames: 0, bytes: 1000, peakScore: 0.25, part: 1)
    }

    /// A counter of `/proc/PID/io` (`rchar`: the bytes the process has read).
    static func ioCounter(_ name: String, of pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").first { $0.hasPrefix(name + ":") }
            .flatMap { Int($0.split(separator: " ").last ?? "") }
    }

    /// 20,000 clips in the catalogue and no journal line: every one listed, newest first; the
    /// first lines are out while the list is far from read (the listing blocked on a pipe no one
    /// reads has read a small part of the catalogue), and the upload column is the catalogue's.
    @Test func listsTheCataloguePageByPageWithoutReadingItWholeFirst() throws {
        let fixture = try ClipsDirectory()
        defer { fixture.dir.remove() }
        let count = 20_000
        let records = (0..<count).map { Self.record(fixture, minutes: $0) }
        let catalogue = try SQLiteCatalogue(path: fixture.storage.path(CatalogueFile.name))
        try catalogue.add(records.map { CatalogueEntry(record: $0) })
        try catalogue.setUpload(
            .uploaded(url: "s3://clips/yard/" + records[count - 1].file), of: records[count - 1].file)
        try catalogue.setUpload(.waiting, of: records[count - 2].file)
        try catalogue.setUpload(.failed(reason: "PUT: 403 AccessDenied"), of: records[count - 3].file)
        // Uploads were on (their queue is there): the upload column is shown.
        #expect(FileManager.default.createFile(atPath: fixture.storage.path("uploads.jsonl"), contents: Data()))
        let on = try FileManager.default.attributesOfItem(atPath: catalogue.path)[.size] as? Int ?? 0
        #expect(on > 4 << 20, "a catalogue of \(on) bytes")

        let process = Process()
        process.executableURL = URL(fileURLWithPath: builtExecutable("vigil"))
        process.arguments = ["clips", "--config", fixture.config]
        var environment = ProcessInfo.processInfo.environment
        environment["TZ"] = "UTC"
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        var received = Data()
        while !received.split(separator: 10).dropFirst().contains(where: { !$0.isEmpty }) {
            let piece = out.fileHandleForReading.availableData
            guard !piece.isEmpty else { break }
            received += piece
        }
        // Nothing more is read: the listing fills the pipe and waits (its reads stop growing).
        var read = Self.ioCounter("rchar", of: process.processIdentifier) ?? 0
        _ = waitUntil(timeout: 60) {
            Thread.sleep(forTimeInterval: 0.5)
            let now = Self.ioCounter("rchar", of: process.processIdentifier) ?? 0
            defer { read = now }
            return now == read
        }
        #expect(process.isRunning, "the listing ended before the pipe was read")
        #expect(read < on / 4, "\(read) bytes read of a catalogue of \(on) before the first lines were taken")

        received += out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let rows = String(decoding: received, as: UTF8.self).split(separator: "\n").map(String.init)
        try #require(rows.count == count + 3, "\(rows.prefix(3)) … \(rows.suffix(2))")
        #expect(rows[0].hasPrefix("start") && rows[0].contains("upload") && rows[0].hasSuffix("file"), "\(rows[0])")
        let listed = rows.dropFirst().prefix(count).map { $0.split(separator: " ").last.map(String.init) ?? "" }
        // Each line ends with its file, but the files are not on the disk: "(deleted)" follows.
        #expect(rows[1].hasSuffix(records[count - 1].file + "  (deleted)"), "\(rows[1])")
        #expect(listed.count == count)
        #expect(rows[1].contains(" uploaded "), "\(rows[1])")
        #expect(rows[2].contains(" waiting "), "\(rows[2])")
        #expect(rows[3].contains(" failed "), "\(rows[3])")
        #expect(rows[4].contains(" - "), "\(rows[4])")
        #expect(rows[count].contains(records[0].file), "the oldest last: \(rows[count])")
        #expect(rows[count + 1] == "\(count) clip(s) in \(fixture.dir.file("clips"))", "\(rows[count + 1])")
        #expect(
            rows[count + 2]
                == "1 uploaded, 1 waiting, 1 failed (set aside; the agent tries them again when it restarts) (catalogue.sqlite)",
            "\(rows[count + 2])")
    }

    /// A directory no agent of this version started has no catalogue: the journal is listed,
    /// and stderr says why and what makes the catalogue.
    @Test func withoutACatalogueTheJournalIsListedAndThatIsSaid() throws {
        let fixture = try ClipsDirectory()
        defer { fixture.dir.remove() }
        let record = Self.record(fixture, minutes: 0)
        try EventsJournal(storage: fixture.storage).append(record)
        let listed = try clips("--config", fixture.config)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains(record.file), "\(listed.stdout)")
        #expect(
            listed.stderr.contains("no clip catalogue in \(fixture.dir.file("clips")) yet")
                && listed.stderr.contains("start the agent once"), "\(listed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: fixture.storage.path(CatalogueFile.name)), "none made")
    }

    /// A catalogue that cannot be read (no database): the journal is listed, said, and the
    /// catalogue is left as it is (the agent sets it aside when it starts).
    @Test func aCatalogueThatCannotBeReadLeavesTheJournalListed() throws {
        let fixture = try ClipsDirectory()
        defer { fixture.dir.remove() }
        let record = Self.record(fixture, minutes: 0)
        try EventsJournal(storage: fixture.storage).append(record)
        let garbage = Data(repeating: 0x5A, count: 8192)
        let path = fixture.storage.path(CatalogueFile.name)
        #expect(FileManager.default.createFile(atPath: path, contents: garbage))
        let listed = try clips("--config", fixture.config)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains(record.file), "\(listed.stdout)")
        #expect(
            listed.stderr.contains(path) && listed.stderr.contains("listed from events.jsonl meanwhile"),
            "\(listed.stderr)")
        #expect(FileManager.default.contents(atPath: path) == garbage)
    }

    /// `--json` from the catalogue: each clip's journal record, one line each, newest first, and
    /// nothing else on stdout.
    @Test func jsonFromTheCatalogueIsEachClipsRecordNewestFirst() throws {
        let fixture = try ClipsDirectory()
        defer { fixture.dir.remove() }
        let records = (0..<3).map { Self.record(fixture, minutes: $0) }
        let catalogue = try SQLiteCatalogue(path: fixture.storage.path(CatalogueFile.name))
        try catalogue.add(records.map { CatalogueEntry(record: $0) })
        let listed = try clips("--config", fixture.config, "--json")
        #expect(listed.status == 0 && listed.stderr.isEmpty, "\(listed.stderr)")
        let lines = listed.stdout.split(separator: "\n").map(String.init)
        let decoded = try lines.map { try JSONDecoder().decode(ClipRecord.self, from: Data($0.utf8)) }
        #expect(decoded == records.reversed())
    }
}
