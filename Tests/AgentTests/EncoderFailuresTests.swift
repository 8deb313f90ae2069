import Agent
import Media
import Testing

@Suite struct EncoderFailuresTests {
    func at(_ seconds: Double) -> Timestamp { Timestamp(nanoseconds: Int64(seconds * 1e9)) }

    /// Three failures within ten minutes give the hardware encoder up; failures spread wider
    /// than that never do.
    @Test func threeFailuresInTenMinutesGiveUp() {
        var failures = EncoderFailures()
        #expect(failures.failed(at: at(0)) == .reopen)
        #expect(failures.failed(at: at(300)) == .reopen)
        #expect(failures.failed(at: at(599)) == .giveUp)

        var spread = EncoderFailures()
        for n in 0..<20 { #expect(spread.failed(at: at(Double(n) * 301)) == .reopen, "failure \(n)") }
        #expect(spread.recent.count == 2)
    }

    /// The window slides: the oldest failure stops counting exactly ten minutes after it.
    @Test func theWindowSlides() {
        var failures = EncoderFailures()
        _ = failures.failed(at: at(0))
        _ = failures.failed(at: at(100))
        #expect(failures.failed(at: at(600)) == .reopen)  // the first has just left the window
        #expect(failures.failed(at: at(650)) == .giveUp)  // 100, 600 and 650
    }
}
