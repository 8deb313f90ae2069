import Media
import TestSupport
import Testing

@testable import Agent

/// `StallWatch`, driven with chosen frame times: how long the pipeline waits for a frame
/// before the source counts as stalled, and what a stall does to the frame interval.
@Suite struct StallWatchTests {
    /// Frames at `rate` per second from `start` for `count` frames.
    static func feed(_ watch: inout StallWatch, rate: Double, from start: Double = 0, count: Int) {
        for i in 0..<count { _ = watch.frame(at: .s(start + Double(i) / rate)) }
    }

    /// The seconds of a jump, nil for any other arrival.
    static func jump(_ arrival: StallWatch.Arrival) -> Double? {
        if case .jumped(let by) = arrival { by.seconds } else { nil }
    }

    @Test func noTimeoutBeforeTheStreamStarts() {
        var watch = StallWatch()
        #expect(watch.timeout(streaming: false) == nil)
        Self.feed(&watch, rate: 30, count: 10)
        #expect(watch.timeout(streaming: false) == nil, "not streaming: the encoder is not there yet or any more")
        #expect(watch.timeout(streaming: true) != nil)
    }

    @Test(arguments: [
        (30.0, 5.0),  // a camera: the minimum
        (2.0, 5.0),  // ten intervals are 5 s
        (1.0, 10.0),  // a slow camera: ten frame intervals
        (0.25, 40.0),
    ])
    func timeoutIsTheMinimumOrTenFrameIntervals(rate: Double, seconds: Double) throws {
        var watch = StallWatch()
        Self.feed(&watch, rate: rate, count: 3)
        let timeout = try #require(watch.timeout(streaming: true))
        #expect(abs(timeout - seconds) < 1e-9)
        #expect(timeout >= StallWatch.minimum)
    }

    /// Before two frames have come, the interval is taken as 1/30 s: the minimum applies.
    @Test func oneFrameGivesTheMinimum() {
        var watch = StallWatch()
        _ = watch.frame(at: .s(3))
        #expect(watch.timeout(streaming: true) == StallWatch.minimum)
    }

    /// While stalled the pipeline waits for ever; the next frame ends the stall (once), and
    /// the gap of the stall is not taken for the frame interval.
    @Test func aFrameAfterAStallEndsIt() {
        var watch = StallWatch()
        Self.feed(&watch, rate: 10, count: 20)  // 0 … 1.9 s
        watch.timedOut()
        #expect(watch.isStalled)
        #expect(watch.timeout(streaming: true) == nil)
        #expect(watch.frame(at: .s(60)) == .afterStall, "the first frame after the stall ends it")
        #expect(!watch.isStalled)
        #expect(abs(watch.frameInterval.seconds - 0.1) < 1e-9, "the 58 s gap is not a frame interval")
        #expect(watch.timeout(streaming: true) == StallWatch.minimum)
        #expect(watch.frame(at: .s(60.1)) == .next, "only the first frame after a stall ends it")
        #expect(abs(watch.frameInterval.seconds - 0.1) < 1e-9)
    }

    @Test func framesWithoutAStallEndNothing() {
        var watch = StallWatch()
        let arrivals = (0..<5).map { watch.frame(at: .s(Double($0))) }
        #expect(arrivals == [.next, .next, .next, .next, .next])
    }

    /// A lost camera ends the stream: the next frame starts a new one, and the gap before it
    /// is not a frame interval.
    @Test func streamEndedForgetsTheLastFrame() {
        var watch = StallWatch()
        Self.feed(&watch, rate: 5, count: 4)  // 0, 0.2, 0.4, 0.6
        #expect(watch.lastFrame == .s(0.6))
        watch.streamEnded()
        #expect(watch.lastFrame == nil)
        _ = watch.frame(at: .s(30))
        #expect(abs(watch.frameInterval.seconds - 0.2) < 1e-9)
        _ = watch.frame(at: .s(30.5))
        #expect(abs(watch.frameInterval.seconds - 0.5) < 1e-9)
    }

    /// A frame stamped before the last one (a camera's clock stepping back) breaks the stream
    /// and leaves the interval as it was; one stamped the same is the next frame.
    @Test func aFrameNotAfterTheLastLeavesTheInterval() {
        var watch = StallWatch()
        Self.feed(&watch, rate: 4, count: 3)  // interval 0.25
        #expect(Self.jump(watch.frame(at: .s(0.1))).map { abs($0 + 0.4) < 1e-6 } == true)
        #expect(watch.lastFrame == .s(0.5), "the last frame before the jump, where the stream ends")
        #expect(abs(watch.frameInterval.seconds - 0.25) < 1e-9)
        #expect(watch.frame(at: .s(0.5)) == .next, "the same time again is no jump")
        watch.streamEnded()
        #expect(watch.frame(at: .s(0.1)) == .next, "the first frame of the next stream")
        #expect(abs(watch.frameInterval.seconds - 0.25) < 1e-9)
    }

    /// Frame times that leap ahead by more than a stall lasts (the process was stopped and
    /// continued; the source's clock stepped) break the stream; a gap within it does not.
    @Test(arguments: [
        (30.0, 4.9, false), (30.0, 5.1, true),  // the minimum
        (1.0, 9.0, false), (1.0, 11.0, true),  // a slow camera: ten intervals
    ])
    func aLeapLongerThanAStallBreaksTheStream(rate: Double, gap: Double, breaks: Bool) {
        var watch = StallWatch()
        Self.feed(&watch, rate: rate, count: 5)
        let last = 4 / rate
        let arrival = watch.frame(at: .s(last + gap))
        #expect(breaks ? Self.jump(arrival).map { abs($0 - gap) < 1e-6 } == true : arrival == .next, "\(arrival)")
        #expect(abs(watch.frameInterval.seconds - (breaks ? 1 / rate : gap)) < 1e-9, "a leap is no interval")
        if breaks {
            #expect(watch.lastFrame == .s(last))
            watch.streamEnded()
            #expect(watch.frame(at: .s(last + gap)) == .next)
        }
        #expect(watch.frame(at: .s(last + gap + 1 / rate)) == .next)
    }
}
