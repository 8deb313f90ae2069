import Foundation
import Media
import Storage
import TestSupport
import Testing

@testable import Recorder

/// Recorder builds on FoundationEssentials alone; this checks that the journal's times are
/// what Foundation (loaded here, with ICU) wrote before.
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
            let t =
                (milliseconds + [0, 0.5, 0.4999, 0.5001, 0.9996, Double(random.next() % 1000) / 1000][i % 6]) / 1000
            let date = Date(timeIntervalSince1970: t)
            #expect(ClipRecord.timestamp(date, timeZone: timeZone) == formatter.string(from: date), "\(t)")
        }
    }
}
