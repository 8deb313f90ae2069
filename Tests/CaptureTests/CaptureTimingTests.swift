import Capture
import Media
import Testing

@Suite struct SequenceCounterTests {
    @Test func consecutiveFramesLoseNothing() {
        var counter = SequenceCounter()
        let out = (100..<110).map { counter.count(UInt32($0)) }
        #expect(out.map(\.sequence) == (0..<10).map { UInt64($0) })
        #expect(out.allSatisfy { $0.lost == 0 })
        #expect(counter.lost == 0)
    }

    @Test func gapsAreLostFrames() {
        var counter = SequenceCounter()
        #expect(counter.count(0) == (0, 0))
        #expect(counter.count(1) == (1, 0))
        #expect(counter.count(4) == (4, 2))
        #expect(counter.count(5) == (5, 0))
        #expect(counter.count(15) == (15, 9))
        #expect(counter.lost == 11)
    }

    /// vivid's "Sequence Wrap" control starts the count just below 2^32.
    @Test func wrapsAroundTwoToTheThirtyTwo() {
        var counter = SequenceCounter()
        let raws: [UInt32] = [0xFFFF_FFFD, 0xFFFF_FFFE, 0xFFFF_FFFF, 0, 1, 3]
        let out = raws.map { counter.count($0) }
        #expect(out.map(\.sequence) == [0, 1, 2, 3, 4, 6])
        #expect(out.map(\.lost) == [0, 0, 0, 0, 0, 1])
    }

    /// A driver that restarts its count (a new stream) loses nothing.
    @Test func goingBackwardsContinuesTheCount() {
        var counter = SequenceCounter()
        for raw: UInt32 in [500, 501, 502] { _ = counter.count(raw) }
        #expect(counter.count(0) == (3, 0))
        #expect(counter.count(1) == (4, 0))
        // The same number twice (a repeated buffer) is not a gap either.
        #expect(counter.count(1) == (5, 0))
        #expect(counter.lost == 0)
    }
}

@Suite struct BufferTimestampTests {
    let dequeued = Timestamp(seconds: 500)

    @Test func monotonicTimestampsAreTakenAsTheyAre() {
        let t = BufferTimestamp.capture(
            seconds: 123, microseconds: 456_789, flags: 0x2000 | 0x0001, dequeuedAt: dequeued)
        #expect(t == Timestamp(nanoseconds: 123_456_789_000))
    }

    /// Unknown (0x0000) and copied (0x4000) timestamps are not on our clock: the dequeue time stands in.
    @Test(arguments: [UInt32(0x0000), 0x4000, 0x6000])
    func otherClocksFallBackToTheDequeueTime(flags: UInt32) {
        #expect(
            BufferTimestamp.capture(seconds: 123, microseconds: 456, flags: flags, dequeuedAt: dequeued) == dequeued)
    }

    @Test func aZeroTimestampFallsBackToo() {
        #expect(BufferTimestamp.capture(seconds: 0, microseconds: 0, flags: 0x2000, dequeuedAt: dequeued) == dequeued)
    }
}

@Suite struct AudioTimelineTests {
    static let rate = 48000
    static let period = 480  // 10 ms

    /// The true capture time of chunk `i`, with a deterministic jitter of up to ±3 ms.
    static func measured(_ i: Int, start: Double = 100, jitter: Double = 0.003, drift: Double = 0) -> Timestamp {
        let truth = start + Double(i * period) / Double(rate) * (1 + drift)
        let wobble = jitter * Double((i * 7919) % 13 - 6) / 6
        return Timestamp(seconds: truth + wobble)
    }

    @Test func chunksFollowOneAnotherWhileMeasurementsAgree() {
        var line = AudioTimeline(sampleRate: Self.rate)
        var times: [Timestamp] = []
        for i in 0..<500 { times.append(line.place(measured: Self.measured(i), frames: Self.period)) }
        for i in 1..<times.count {
            // Consecutive chunks are exactly a period apart, give or take the slow correction.
            let step = (times[i] - times[i - 1]).seconds
            #expect(abs(step - 0.01) < 0.0005, "chunk \(i): \(step)")
        }
        // And the line stays on the true times (the first measurement's jitter at most).
        for (i, t) in times.enumerated() {
            let truth = 100 + Double(i * Self.period) / Double(Self.rate)
            #expect(abs(t.seconds - truth) < 0.004, "chunk \(i) at \(t.seconds), truth \(truth)")
        }
    }

    /// A sound card whose clock runs 200 ppm fast against the monotonic clock: the line follows.
    @Test func followsClockDrift() {
        var line = AudioTimeline(sampleRate: Self.rate)
        var last = Timestamp.zero
        let count = 30_000  // 300 s
        for i in 0..<count {
            last = line.place(measured: Self.measured(i, jitter: 0.002, drift: 200e-6), frames: Self.period)
        }
        let truth = 100 + Double((count - 1) * Self.period) / Double(Self.rate) * (1 + 200e-6)
        #expect(abs(last.seconds - truth) < 0.005, "\(last.seconds) against \(truth)")
    }

    @Test func aJumpRestartsTheLine() {
        var line = AudioTimeline(sampleRate: Self.rate)
        for i in 0..<10 { _ = line.place(measured: Timestamp(seconds: 100 + Double(i) * 0.01), frames: Self.period) }
        // 250 ms of sound missing (an overrun): the next chunk is placed where it was measured.
        let after = Timestamp(seconds: 100 + 0.1 + 0.25)
        #expect(line.place(measured: after, frames: Self.period) == after)
        // And the following one continues from there.
        #expect(
            line.place(measured: after + .init(seconds: 0.0101), frames: Self.period).seconds - after.seconds - 0.01
                < 0.0001)
    }

    @Test func resetForgetsTheLine() {
        var line = AudioTimeline(sampleRate: Self.rate)
        _ = line.place(measured: Timestamp(seconds: 5), frames: Self.period)
        line.reset()
        let t = Timestamp(seconds: 5.0105)
        #expect(line.place(measured: t, frames: Self.period) == t)
    }

    /// ALSA's pair (ts, avail): the first unread frame was captured avail/rate before ts.
    @Test func firstUnreadFrameFromTheDriverTimestamp() {
        let ts = Timestamp(seconds: 1000)
        let now = ts + .init(seconds: 0.003)
        let twentyBefore = ts - Timestamp.Duration(seconds: 0.02)
        #expect(
            AudioTimeline.firstUnreadFrame(timestamp: ts, available: 960, sampleRate: 48000, now: now) == twentyBefore)
        // No timestamp (zero) or one on another clock: the read time stands in.
        let tenBeforeNow = now - Timestamp.Duration(seconds: 0.01)
        #expect(
            AudioTimeline.firstUnreadFrame(timestamp: .zero, available: 480, sampleRate: 48000, now: now)
                == tenBeforeNow)
        let wallClock = Timestamp(seconds: 1_700_000_000)
        #expect(AudioTimeline.firstUnreadFrame(timestamp: wallClock, available: 0, sampleRate: 48000, now: now) == now)
    }
}

@Suite struct FrameTimelineTests {
    static let rate = Rational(25, 1)
    static let period = 0.04

    /// Stamps with up to ±4 ms of jitter land exactly on the 40 ms grid of the first one.
    @Test func jitteredStampsLandOnTheGrid() {
        var line = FrameTimeline(rate: Self.rate)
        var first: Timestamp?
        for i in 0..<500 {
            let wobble = 0.004 * Double((i * 7919) % 9 - 4) / 4
            let t = line.place(Timestamp(seconds: 1000 + Double(i) * Self.period + wobble))
            let origin = first ?? t
            first = origin
            #expect(
                t == origin + .init(nanoseconds: Timestamp(frameIndex: Int64(i), rate: Self.rate).nanoseconds),
                "frame \(i) at \(t)")
        }
        #expect(line.restarts == 0)
    }

    /// Lost frames leave whole intervals out.
    @Test func lostFramesLeaveWholeIntervals() {
        var line = FrameTimeline(rate: Self.rate)
        let indices: [Int64] = [0, 1, 2, 5, 6, 30, 31]
        let placed = indices.map { line.place(Timestamp(seconds: 50 + Double($0) * Self.period + 0.003)) }
        for (i, t) in zip(indices, placed) {
            #expect(t == placed[0] + .init(nanoseconds: Timestamp(frameIndex: i, rate: Self.rate).nanoseconds))
        }
    }

    /// NTSC rates: the grid is exact in nanoseconds, rounded per frame, never accumulating.
    @Test func fractionalRatesStayExact() {
        let rate = Rational(30000, 1001)
        var line = FrameTimeline(rate: rate)
        var last = Timestamp.zero
        for i in 0..<10_000 {
            last = line.place(
                Timestamp(frameIndex: Int64(i), rate: rate)
                    + .init(nanoseconds: 7_000_000_000 + Int64((i % 5) * 500_000)))
        }
        #expect(
            last == Timestamp(nanoseconds: 7_000_000_000)
                + .init(nanoseconds: Timestamp(frameIndex: 9999, rate: rate).nanoseconds))
        #expect(line.restarts == 0)
    }

    /// A camera 1% faster than it says drifts off the grid: the grid starts again where the
    /// frame is, times keep increasing, and no time moves by more than a quarter interval.
    @Test func aDriftingCameraRestartsTheGrid() {
        var line = FrameTimeline(rate: Self.rate)
        var previous: Timestamp?
        for i in 0..<1000 {
            let measured = Timestamp(seconds: 10 + Double(i) * Self.period * 0.99)
            let t = line.place(measured)
            #expect(abs((t - measured).seconds) <= Self.period / 4 + 1e-9)
            if let previous { #expect(t > previous) }
            previous = t
        }
        #expect(line.restarts > 0 && line.restarts < 100)
    }

    /// Driver stamps that stand still or go back (a starved driver, a camera clock reset):
    /// the encoder must still see increasing times, half an interval apart at least.
    @Test func stampsThatGoBackStillIncrease() {
        var line = FrameTimeline(rate: Self.rate)
        let stamps = [10.000, 10.040, 10.084, 10.081, 10.081, 10.120, 9.000, 9.040, 10.400]
        let placed = stamps.map { line.place(Timestamp(seconds: $0)) }
        for (a, b) in zip(placed, placed.dropFirst()) {
            #expect((b - a).seconds >= Self.period / 2 - 1e-9, "\(a) then \(b)")
        }
        // Back on the grid of the last restart as soon as the stamps allow.
        #expect(placed[2] == Timestamp(seconds: 10.080))
        #expect(line.restarts >= 3)
    }

    /// A stall of half a second, then frames again: a new grid from there.
    @Test func aJumpOffTheGridStartsAgain() {
        var line = FrameTimeline(rate: Self.rate)
        _ = line.place(Timestamp(seconds: 1.000))
        _ = line.place(Timestamp(seconds: 1.040))
        let off = Timestamp(seconds: 1.5)  // 12.5 intervals after the first: half an interval off
        #expect(line.place(off) == off)
        #expect(line.place(Timestamp(seconds: 1.5401)) == off + .init(seconds: 0.04))
        #expect(line.restarts == 1)
    }
}
