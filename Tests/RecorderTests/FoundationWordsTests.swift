import Foundation
import Media
import Storage
import Testing
import TestSupport
@testable import Recorder

/// Recorder builds on FoundationEssentials alone; these check that what it writes is what
/// Foundation (loaded here, with ICU) wrote before.
@Suite struct FoundationWordsTests {
    @Test(arguments: ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "America/St_Johns"])
    func timestampsAreWhatISO8601DateFormatterWrote(zone: String) throws {
        let timeZone = try #require(TimeZone(identifier: zone))
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = timeZone
        var random = SplitMix64(seed: 11)
        for i in 0..<3000 {
            let milliseconds = Double(1_600_000_000_000 + random.next() % 300_000_000_000)
            // Whole and half milliseconds, and anything between: rounding and carries.
            let t = (milliseconds + [0, 0.5, 0.4999, 0.5001, 0.9996, Double(random.next() % 1000) / 1000][i % 6]) / 1000
            let date = Date(timeIntervalSince1970: t)
            #expect(ClipRecord.timestamp(date, timeZone: timeZone) == formatter.string(from: date), "\(t)")
        }
    }

    @Test func fileErrorWordsAreFoundations() throws {
        for code in [4, 255, 256, 257, 258, 259, 260, 261, 262, 263, 264, 512, 513, 514, 516, 517, 518, 640, 642, 3072, 3328, 999] {
            let error = CocoaError(CocoaError.Code(rawValue: code))
            #expect(describeFileError(error) == error.localizedDescription)
        }
        do {
            try FileManager.default.removeItem(atPath: "/nonexistent/clip.mov")
            Issue.record("removing a missing file succeeded")
        } catch {
            #expect(describeFileError(error) == error.localizedDescription)
        }
    }

    @Test func aFullDiskInTheJournalSaysSoInFoundationsWords() throws {
        let dir = try TemporaryDirectory("vigil-journal")
        defer { dir.remove() }
        let journal = EventsJournal(directory: dir.path)
        try FileManager.default.createSymbolicLink(atPath: journal.path, withDestinationPath: "/dev/full")
        let record = ClipRecord(file: "a.mov", camera: "shed", start: "", end: "", trigger: nil, triggerSourceSeconds: nil,
                                preRollSeconds: nil, durationSeconds: 1, frames: 30, audioFrames: 0, bytes: 1, peakScore: nil, part: 1)
        do {
            try journal.append(record)
            Issue.record("appending to a full disk succeeded")
        } catch {
            #expect(error.description == "cannot append to \(journal.path): The operation could not be completed. There isn’t enough space.")
        }
    }
}
