import Foundation
import Media
import Recorder
import Storage
import TestSupport
import Testing

/// The clip catalogue in a real SQLite file: pages that follow their cursors through every clip
/// once, days and their counts, the filters the page offers, retention's order, what survives a
/// reopen, and files that are no catalogue said so, to be set aside and rebuilt.
@Suite struct SQLiteCatalogueTests {
    /// A clip recorded at `start` (seconds since 1970, written in UTC), as the journal has it.
    static func entry(
        _ index: Int, start: Double, cause: TriggerCause? = .motion, damaged: Bool = false,
        upload: UploadState? = nil, agedFrom: Double? = nil
    ) -> CatalogueEntry {
        let zone = TimeZone(identifier: "UTC")!
        let started = Date(timeIntervalSince1970: start)
        let day = ClipRecord.timestamp(started, timeZone: zone).prefix(10)
        let file = "\(day)/shed-\(String(format: "%06d", index)).mov"
        let record = ClipRecord(
            file: damaged ? file + ".damaged" : file, camera: "shed",
            start: ClipRecord.timestamp(started, timeZone: zone),
            end: ClipRecord.timestamp(started.addingTimeInterval(12), timeZone: zone), cause: cause,
            triggerTime: ClipRecord.timestamp(started.addingTimeInterval(3), timeZone: zone),
            triggerSourceSeconds: 3, preRollSeconds: 3, durationSeconds: 12, frames: 300, audioFrames: 0,
            bytes: UInt64(1000 + index), peakScore: 0.25, part: 1, snapshot: file + ".jpg",
            damaged: damaged ? true : nil,
            agedFrom: agedFrom.map { ClipRecord.timestamp(Date(timeIntervalSince1970: $0), timeZone: zone) })
        return CatalogueEntry(record: record, pictureBytes: 100, upload: upload)
    }

    /// 250 clips over three days (2026-12-05 to 07), one every 15 minutes, a few to the second.
    static func year() -> [CatalogueEntry] {
        let base = 1_796_428_800.0  // 2026-12-05T00:00:00Z
        return (0..<250).map { entry($0, start: base + Double($0) * 900 + ($0 % 7 == 0 ? 0 : 1)) }
    }

    @Test func pagesFollowTheirCursorsThroughEveryClipOnceNewestFirst() throws {
        let catalogue = try SQLiteCatalogue.inMemory()
        let clips = Self.year()
        try catalogue.add(clips)
        var seen: [String] = []
        var query = ClipQuery(limit: 100)
        var pages = 0
        while true {
            let page = try catalogue.page(query)
            pages += 1
            seen += page.entries.map(\.file)
            guard let next = page.next else { break }
            #expect(page.entries.count == 100)
            query.before = try #require(ClipCursor(text: next.text), "the cursor reads back from its text")
        }
        #expect(pages == 3)
        #expect(seen == clips.reversed().map(\.file))
        // The default page is 100; none is larger than 1000; a page of the first day alone.
        #expect(try catalogue.page(ClipQuery()).entries.count == 100)
        #expect(ClipQuery(limit: 1_000_000).limit == ClipQuery.largestPage)
        let first = try catalogue.page(ClipQuery(day: "2026-12-05", limit: 1000))
        #expect(first.entries.count == 96 && first.next == nil)
        #expect(first.entries.allSatisfy { $0.day == "2026-12-05" })
    }

    @Test func daysAreCountedNewestFirstAndPaged() throws {
        let catalogue = try SQLiteCatalogue.inMemory()
        try catalogue.add(Self.year())
        #expect(
            try catalogue.days(ClipQuery(), before: nil, limit: 10) == [
                DayCount(day: "2026-12-07", clips: 58), DayCount(day: "2026-12-06", clips: 96),
                DayCount(day: "2026-12-05", clips: 96),
            ])
        #expect(
            try catalogue.days(ClipQuery(), before: "2026-12-07", limit: 1) == [DayCount(day: "2026-12-06", clips: 96)])
    }

    @Test func filtersListOnlyWhatTheyAskFor() throws {
        let catalogue = try SQLiteCatalogue.inMemory()
        let base = 1_796_428_800.0
        try catalogue.add([
            Self.entry(1, start: base, cause: .motion, upload: .uploaded(url: "s3://clips/a.mov")),
            Self.entry(2, start: base + 60, cause: .external, upload: .waiting),
            Self.entry(3, start: base + 120, cause: nil, damaged: true),
            Self.entry(4, start: base + 180, cause: .motion, upload: .failed(reason: "403 Forbidden")),
        ])
        func files(_ query: ClipQuery) throws -> [String] { try catalogue.page(query).entries.map { $0.file } }
        #expect(try files(ClipQuery(cause: .external)).map { $0.hasSuffix("000002.mov") } == [true])
        #expect(try files(ClipQuery(cause: .motion)).count == 2)
        #expect(try files(ClipQuery(damaged: true)) == ["2026-12-05/shed-000003.mov.damaged"])
        #expect(try files(ClipQuery(damaged: false)).count == 3)
        #expect(try files(ClipQuery(upload: "waiting")).count == 1)
        #expect(
            try catalogue.page(ClipQuery(upload: "failed")).entries.first?.upload == .failed(reason: "403 Forbidden"))
        #expect(
            try catalogue.days(ClipQuery(cause: .motion), before: nil, limit: 5) == [
                DayCount(day: "2026-12-05", clips: 2)
            ])

        // An upload's state moves on; a clip without an entry is no error.
        try catalogue.setUpload(.uploaded(url: "s3://clips/b.mov"), of: "2026-12-05/shed-000002.mov")
        try catalogue.setUpload(.waiting, of: "2026-12-05/gone.mov")
        #expect(try catalogue.entry("2026-12-05/shed-000002.mov")?.upload == .uploaded(url: "s3://clips/b.mov"))
        #expect(try files(ClipQuery(upload: "waiting")).isEmpty)
    }

    /// Empty texts are values like any other: a record whose start is no time (an old journal's
    /// line, a hand-edited one) and an upload failed for no stated reason are kept and read back.
    @Test func emptyTextsAreKeptAsTheyAre() throws {
        let catalogue = try SQLiteCatalogue.inMemory()
        var odd = Self.entry(1, start: 1_796_428_800, upload: .failed(reason: ""))
        odd.record.start = ""
        odd.record.camera = ""
        try catalogue.add(odd)
        #expect(try catalogue.entry(odd.file) == odd)
        #expect(try catalogue.page(ClipQuery()).entries == [odd])
        #expect(try catalogue.days(ClipQuery(), before: nil, limit: 5) == [DayCount(day: "", clips: 1)])
    }

    @Test func retentionTakesTheOldestByTheDateItAgesFrom() throws {
        let catalogue = try SQLiteCatalogue.inMemory()
        let base = 1_796_428_800.0
        // Clip 2 was recorded on a clock set in 2001: it ages from when the agent saw it.
        try catalogue.add([
            Self.entry(1, start: base + 100), Self.entry(2, start: 978_307_200, agedFrom: base + 200),
            Self.entry(3, start: base + 50),
        ])
        #expect(
            try catalogue.oldest(after: nil, limit: 2).map(\.entry.file) == [
                "2026-12-05/shed-000003.mov", "2026-12-05/shed-000001.mov",
            ])
        #expect(try catalogue.totals() == CatalogueTotals(clips: 3, bytes: 1001 + 1002 + 1003 + 300))
        try catalogue.remove(["2026-12-05/shed-000003.mov", "2026-12-05/never-there.mov"])
        #expect(try catalogue.totals() == CatalogueTotals(clips: 2, bytes: 1001 + 1002 + 200))
        #expect(try catalogue.entry("2026-12-05/shed-000003.mov") == nil)
    }

    @Test func anEntryIsKeptWholeAndSurvivesAReopenBesideAReader() throws {
        let directory = try TemporaryDirectory("vigil-catalogue")
        defer { directory.remove() }
        let path = directory.file(SQLiteCatalogue.name)
        let clips = Self.year()
        do {
            let catalogue = try SQLiteCatalogue(path: path)
            try catalogue.add(Array(clips.prefix(200)))
            // A reader beside the writer (`vigil clips` while the agent runs) sees what is committed.
            let reader = try SQLiteCatalogue(path: path, readOnly: true)
            #expect(try reader.totals().clips == 200)
            try catalogue.add(Array(clips.dropFirst(200)))
            #expect(try reader.totals().clips == 250)
            // Replacing an entry (a picture written later, a repair) keeps one per clip.
            var repaired = clips[0]
            repaired.record.repaired = true
            repaired.pictureBytes = 4096
            try catalogue.add(repaired)
        }
        let reopened = try SQLiteCatalogue(path: path)
        #expect(try reopened.totals().clips == 250)
        #expect(try reopened.entry(clips[0].file)?.record.repaired == true)
        #expect(try reopened.entry(clips[0].file)?.pictureBytes == 4096)
        #expect(try reopened.entry(clips[7].file) == clips[7])
        // Written in WAL mode, every commit synced.
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test func aFileThatIsNoCatalogueIsSaidUnreadable() throws {
        let directory = try TemporaryDirectory("vigil-catalogue")
        defer { directory.remove() }
        // Text where the catalogue should be.
        let text = directory.file("text.sqlite")
        try Data("clips, I think\n".utf8).write(to: URL(fileURLWithPath: text))
        let notADatabase = expectError(CatalogueError.self) { try SQLiteCatalogue(path: text) }
        #expect(notADatabase?.isUnreadable == true)
        #expect(notADatabase?.description.contains(text) == true, "\(String(describing: notADatabase))")

        // A catalogue whose pages were overwritten in the middle (a bad SD card).
        let damaged = directory.file("damaged.sqlite")
        do {
            let catalogue = try SQLiteCatalogue(path: damaged)
            try catalogue.add(Self.year())
        }
        let handle = try #require(FileHandle(forUpdatingAtPath: damaged))
        let size = try handle.seekToEnd()
        #expect(size > 8192)
        try handle.seek(toOffset: 4096)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: Int(size) - 4096))
        try handle.close()
        let corrupt = expectError(CatalogueError.self) {
            let catalogue = try SQLiteCatalogue(path: damaged)
            _ = try catalogue.page(ClipQuery(limit: 1000))
        }
        #expect(corrupt?.isUnreadable == true, "\(String(describing: corrupt))")

        // One a newer version wrote: not written over.
        let newer = directory.file("newer.sqlite")
        _ = try runTool("sqlite3", [newer, "PRAGMA user_version = 7; CREATE TABLE future (x);"])
        let refused = expectError(CatalogueError.self) { try SQLiteCatalogue(path: newer) }
        #expect(refused?.isUnreadable == true)
        #expect(refused?.description.contains("newer version of Vigil") == true, "\(String(describing: refused))")
    }

    @Test func aLinkWhereTheCatalogueShouldBeIsNotFollowed() throws {
        let directory = try TemporaryDirectory("vigil-catalogue")
        defer { directory.remove() }
        let elsewhere = directory.file("elsewhere.sqlite")
        let link = directory.file(SQLiteCatalogue.name)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: elsewhere)
        let refused = expectError(CatalogueError.self) { try SQLiteCatalogue(path: link) }
        #expect(refused?.description.contains(link) == true, "\(String(describing: refused))")
        #expect(!FileManager.default.fileExists(atPath: elsewhere), "nothing was made where the link points")
    }
}
