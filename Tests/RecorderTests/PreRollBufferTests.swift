import Media
import Testing

@testable import Recorder

/// Model-based tests: every stream layout below is fed sample by sample, and after every
/// sample the ring is compared with the whole history it has seen.
@Suite struct PreRollBufferTests {
    struct Layout: CustomStringConvertible, Sendable {
        var name: String
        /// Capture times in milliseconds.
        var times: [Int64]
        var keyframes: Set<Int>
        var description: String { name }
    }

    static let layouts: [Layout] = {
        var layouts: [Layout] = []
        for gop in [1, 2, 3, 7, 30] {
            layouts.append(
                Layout(
                    name: "30 fps, GOP \(gop)", times: (0..<90).map { Int64($0) * 33 },
                    keyframes: Set(stride(from: 0, to: 90, by: gop))))
        }
        // 24.7 fps with a keyframe on the first frame at or after each second, and two gaps.
        var times: [Int64] = []
        var t: Int64 = 1000
        for i in 0..<100 {
            times.append(t)
            t += i == 30 ? 700 : (i == 60 ? 2500 : 40)
        }
        var keys: Set<Int> = [0]
        var next = times[0] + 1000
        for (i, time) in times.enumerated() where time >= next {
            keys.insert(i)
            next = time + 1000
        }
        layouts.append(Layout(name: "24.7 fps with gaps, 1 s keyframes", times: times, keyframes: keys))
        // Irregular GOPs.
        layouts.append(
            Layout(
                name: "irregular GOPs", times: (0..<60).map { Int64($0) * 50 },
                keyframes: [0, 1, 5, 6, 7, 20, 21, 40, 59]))
        return layouts
    }()

    func sample(_ layout: Layout, _ i: Int, size: Int = 100) -> EncodedSample {
        let t = Timestamp(nanoseconds: layout.times[i] * 1_000_000)
        return EncodedSample(
            data: [UInt8](repeating: UInt8(i & 0xFF), count: layout.keyframes.contains(i) ? size * 5 : size),
            pts: t, dts: t, isKeyframe: layout.keyframes.contains(i))
    }

    @Test(arguments: layouts, [0, 100, 500, 1000, 2000, 5000] as [Int64])
    func clipStartsAtTheNewestKeyframeAtLeastPreRollBeforeTheTrigger(layout: Layout, preRollMs: Int64) {
        let preRoll = Timestamp.Duration(nanoseconds: preRollMs * 1_000_000)
        var ring = PreRollBuffer(preRoll: preRoll, maxBytes: 1 << 30)
        var history: [EncodedSample] = []
        for i in layout.times.indices {
            let s = sample(layout, i)
            ring.append(s)
            history.append(s)
            guard let firstKey = history.firstIndex(where: \.isKeyframe) else { continue }
            for trigger in [s.pts, s.pts + .init(nanoseconds: 20_000_000)] {
                let latest = trigger - preRoll
                let expected = history.lastIndex { $0.isKeyframe && $0.pts <= latest } ?? firstKey
                #expect(
                    ring.clipStart(forTrigger: trigger) == history[expected].pts,
                    "\(layout) pre-roll \(preRollMs) ms, sample \(i)")
                // Nothing between that keyframe and the newest sample is missing or repeated.
                #expect(ring.clipContents(forTrigger: trigger)?.gops.flatMap(\.samples) == Array(history[expected...]))
            }
            // And no more is held than that: the ring starts at the clip start for "now".
            let now = history.lastIndex { $0.isKeyframe && $0.pts <= s.pts - preRoll } ?? firstKey
            #expect(ring.keyframeTimes.first == history[now].pts)
        }
        #expect(ring.samplesWithoutKeyframe == 0)
        #expect(ring.gopsDroppedForBytes == 0)
    }

    @Test func staysWithinItsByteBoundKeepingTheNewestGOP() {
        let layout = Self.layouts[3]  // 30 fps, GOP 7
        // Each GOP is 500 + 6 × 100 bytes; allow about two and a half.
        var ring = PreRollBuffer(preRoll: .init(seconds: 10), maxBytes: 2800)
        for i in layout.times.indices {
            ring.append(sample(layout, i))
            #expect(ring.byteCount <= 2800 || ring.gopCount == 1)
            #expect(ring.gopCount <= 3)
        }
        #expect(ring.gopsDroppedForBytes > 0)
        // A single GOP larger than the bound is still kept: it is being recorded.
        var tiny = PreRollBuffer(preRoll: .init(seconds: 10), maxBytes: 10)
        for i in 0..<10 { tiny.append(sample(layout, i)) }
        #expect(tiny.gopCount == 1)
        #expect(tiny.keyframeTimes == [Timestamp(nanoseconds: 7 * 33_000_000)])
    }

    @Test func samplesBeforeTheFirstKeyframeAreDropped() {
        var ring = PreRollBuffer(preRoll: .init(seconds: 1), maxBytes: 1 << 20)
        let t = Timestamp(nanoseconds: 1)
        ring.append(EncodedSample(data: [1], pts: t, dts: t, isKeyframe: false))
        #expect(ring.samplesWithoutKeyframe == 1)
        #expect(ring.clipStart(forTrigger: t) == nil)
        #expect(ring.byteCount == 0)
    }

    @Test func soundFollowsTheClipStart() {
        var ring = PreRollBuffer(preRoll: .init(seconds: 1), maxBytes: 1 << 20)
        // Keyframes every second for 5 s at 10 fps; audio in 100 ms chunks at 8 kHz mono.
        for i in 0..<50 {
            let t = Timestamp(nanoseconds: Int64(i) * 100_000_000)
            ring.append(
                AudioChunk(data: [UInt8](repeating: UInt8(i), count: 1600), time: t, sampleRate: 8000, channels: 1))
            ring.append(EncodedSample(data: [UInt8(i)], pts: t, dts: t, isKeyframe: i % 10 == 0))
        }
        // Trigger at 4.95 s: the keyframe at or before 3.95 s is the one at 3 s.
        let trigger = Timestamp(nanoseconds: 4_950_000_000)
        #expect(ring.clipStart(forTrigger: trigger) == Timestamp(seconds: 3))
        let contents = ring.clipContents(forTrigger: trigger)
        #expect(contents?.gops.reduce(0) { $0 + $1.count } == 20)
        #expect(contents?.audio.first?.time == Timestamp(seconds: 3))
        #expect(contents?.audio.reduce(0) { $0 + $1.frames } == 20 * 800)
        // Audio older than the oldest keyframe held is gone.
        #expect(ring.audioBytes == 20 * 1600)
    }

    @Test func audioChunksSplitAtAnInstant() {
        let chunk = AudioChunk(
            data: (0..<400).map { UInt8($0 & 0xFF) }, time: Timestamp(seconds: 1), sampleRate: 8000, channels: 2)
        #expect(chunk.frames == 100)
        let (before, after) = chunk.split(at: Timestamp(seconds: 1.005))  // 40 frames in
        #expect(before?.frames == 40 && after?.frames == 60)
        #expect(after?.time == Timestamp(seconds: 1.005))
        #expect((before?.data ?? []) + (after?.data ?? []) == chunk.data)
        #expect(chunk.split(at: Timestamp(seconds: 0.5)).before == nil)
        #expect(chunk.split(at: Timestamp(seconds: 2)).after == nil)
    }
}
