import Media
import Testing

@Suite struct KeyframeScheduleTests {
    /// The indices of `times` the schedule makes keyframes.
    func keyframes(_ times: [Timestamp], interval: Double = 1) -> [Int] {
        var schedule = KeyframeSchedule(interval: .init(seconds: interval))
        return times.indices.filter { schedule.keyframeDue(at: times[$0]) }
    }

    func frames(rate: Rational, count: Int64, start: Timestamp = .zero) -> [Timestamp] {
        (0..<count).map { start + (Timestamp(frameIndex: $0, rate: rate) - .zero) }
    }

    /// 3.5 s at each rate: the first frame at or after each second is a keyframe — frame 25
    /// at 24.7 fps (1.012 s), frame 30 at 30000/1001 (1.001 s).
    @Test(
        arguments: [
            (Rational(30, 1), [0, 30, 60, 90]),
            (Rational(247, 10), [0, 25, 50, 75]),
            (Rational(30000, 1001), [0, 30, 60, 90]),
        ] as [(Rational, [Int])])
    func keyframeOnTheFirstFrameAtOrAfterEachSecond(rate: Rational, expected: [Int]) {
        let times = frames(rate: rate, count: Int64((3.5 * rate.doubleValue).rounded(.up)))
        let keys = keyframes(times)
        #expect(keys == expected)
        for (k, i) in keys.enumerated() {
            let boundary = Timestamp(seconds: Double(k))
            #expect(times[i] >= boundary)
            #expect(i == 0 || times[i - 1] < boundary, "frame \(i) is not the first at or after \(boundary)")
        }
    }

    /// Lost frames, a burst and a 2.4 s stall (a USB hiccup): boundaries stay at whole
    /// seconds from the first frame; the frame after the stall is a keyframe; no frame is a
    /// second or more after the latest keyframe.
    @Test func gapsKeepKeyframesWithinTheInterval() {
        let lost = Set([3, 17, 29, 30, 31, 44]).union(50..<58).union(95..<167)
        let all = frames(rate: Rational(30, 1), count: 180)
        let kept = all.indices.filter { !lost.contains($0) }
        let times = kept.map { all[$0] }
        let keys = keyframes(times)
        // Frame 32 (30 and 31 were lost), then 60 and 90 on their seconds, then 167: the
        // boundaries at 4 s and 5 s fell inside the stall.
        #expect(keys.map { kept[$0] } == [0, 32, 60, 90, 167])
        var latest = times[0]
        for (i, t) in times.enumerated() {
            if keys.contains(i) { latest = t }
            #expect(t - latest < Timestamp.Duration(seconds: 1), "frame at \(t) is \(t - latest) after its keyframe")
        }
    }

    /// The interval is capture time whatever the rate: at 10 fps, every 5 frames at 0.5 s,
    /// every 10 at 1 s; at 0.25 s the first frame at or after each quarter second (0.3 s,
    /// 0.5 s, 0.8 s, 1.0 s, …).
    @Test(
        arguments: [(0.5, [0, 5, 10, 15]), (1.0, [0, 10]), (0.25, [0, 3, 5, 8, 10, 13, 15, 18])] as [(Double, [Int])])
    func intervalIsCaptureTime(interval: Double, expected: [Int]) {
        #expect(keyframes(frames(rate: Rational(10, 1), count: 20), interval: interval) == expected)
    }

    /// Monotonic-clock instants far from zero (40 days of uptime) count from the first frame.
    @Test func boundariesCountFromTheFirstFrame() {
        let start = Timestamp(nanoseconds: 86_400 * 1_000_000_000 * 40 + 123_456_789)
        var schedule = KeyframeSchedule(interval: .init(seconds: 1))
        let first = schedule.keyframeDue(at: start)
        #expect(first)
        #expect(schedule.origin == start)
        #expect(schedule.nextBoundary == start + .init(seconds: 1))
        #expect(keyframes(frames(rate: Rational(30, 1), count: 36, start: start)) == [0, 30])
    }

    /// A frame exactly on a boundary is the keyframe; one a nanosecond before it is not.
    @Test func aFrameOnTheBoundaryIsTheKeyframe() {
        let times = [0, 999_999_999, 1_000_000_000, 1_999_999_999, 2_000_000_001].map { Timestamp(nanoseconds: $0) }
        #expect(keyframes(times) == [0, 2, 4])
    }
}
