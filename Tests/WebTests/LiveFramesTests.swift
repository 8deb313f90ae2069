import Foundation
import Media
import QuickTime
import Synchronization
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// Issue 44, 4: the live feed frame by frame (`LiveFeed.frames(after:)`), the one-frame
/// fragments the page's live view and `/live.mp4` are made of (`LiveFrameViewer`), read back by
/// ffprobe and ffmpeg, and HLS's playlist kept to RFC 8216 (segment lifetime, numbers that never
/// go back), every live viewer counted.
@Suite struct LiveFramesTests {
    /// The samples of 80 frames, a keyframe every 10, 40 ms apart.
    static func samples() throws -> (movie: LiveMovie, samples: [EncodedSample]) {
        let (movie, gops) = try LiveViewTests.stream()
        return (movie, gops.flatMap(\.samples))
    }

    /// The numbers and times (in frames) of what `next` gave.
    static func frames(_ next: LiveFeed.NextFrames) -> [Int] {
        guard case .frames(let frames) = next else { return [] }
        return frames.map { Int(($0.sample.pts - LiveViewTests.time(0)).nanoseconds / 40_000_000) }
    }

    @Test func aFrameViewerStartsAtTheNewestKeyframeAndTakesEachFrameAfterItsLastInOrder() throws {
        let (movie, samples) = try Self.samples()
        let feed = LiveViewTests.openFeed(movie)
        if case .waiting = feed.frames(after: nil) {} else { Issue.record("nothing published yet: it waits") }
        for sample in samples[0..<14] { feed.publish(frame: sample) }
        // The GOP in progress from its keyframe (frame 10), at once.
        let first = feed.frames(after: nil)
        #expect(Self.frames(first) == Array(10..<14))
        guard case .frames(let taken) = first, let last = taken.last else { return }
        // Then each frame after the last it took, in order, and nothing more.
        feed.publish(frame: samples[14])
        feed.publish(frame: samples[15])
        #expect(Self.frames(feed.frames(after: last.number)) == [14, 15])
        let woken = Atomic(0)
        var slept = false
        let next = feed.frames(after: last.number + 2, sleep: { slept = true }) { woken.add(1, ordering: .relaxed) }
        #expect(slept, "nothing new: it sleeps")
        if case .waiting = next {} else { Issue.record("nothing new: \(next)") }
        feed.publish(frame: samples[16])
        #expect(woken.load(ordering: .relaxed) == 1, "woken by the next frame")
        // One that fell behind past a keyframe goes on from the newest keyframe: it never gets
        // the rest of the GOP it had not taken.
        for sample in samples[17..<23] { feed.publish(frame: sample) }
        #expect(Self.frames(feed.frames(after: last.number)) == [20, 21, 22])
        // The whole-GOP API goes on beside it, as before.
        for sample in samples[23..<80] { feed.take(.frame(sample, sound: [])) }
        #expect(feed.items.isEmpty, "GOPs come as the pipeline completes them, not from frames")
    }

    @Test func aNewStreamStartsAtItsFirstKeyframeAndTheGOPInProgressIsBounded() throws {
        let (movie, samples) = try Self.samples()
        let feed = LiveViewTests.openFeed(movie)
        for sample in samples[0..<5] { feed.publish(frame: sample) }
        guard case .frames(let before) = feed.frames(after: nil) else {
            Issue.record("frames were published")
            return
        }
        // Interrupted and begun again: frames before the new stream's first keyframe are not
        // kept; a viewer of the old stream sees the new one's number.
        feed.interrupt()
        feed.begin(movie)
        for sample in samples[5..<12] { feed.publish(frame: sample) }
        guard case .frames(let after) = feed.frames(after: before.last?.number) else {
            Issue.record("the new stream's frames")
            return
        }
        #expect(after.map(\.sample.isKeyframe) == [true, false] && after[0].stream != before[0].stream)
        // A GOP far longer than any keyframe interval keeps its first `framesKept` frames.
        let key = samples[0]
        feed.publish(
            frame: EncodedSample(
                data: key.data, pts: LiveViewTests.time(100), dts: LiveViewTests.time(100), isKeyframe: true))
        for i in 1...(LiveFeed.framesKept + 50) {
            let t = LiveViewTests.time(100 + i)
            feed.publish(frame: EncodedSample(data: samples[1].data, pts: t, dts: t, isKeyframe: false))
        }
        guard case .frames(let kept) = feed.frames(after: nil) else { return }
        #expect(kept.count == LiveFeed.framesKept)
    }

    /// Reads `viewer` as the server does until it waits or ends.
    static func drain(_ viewer: LiveFrameViewer) -> (bytes: [UInt8], last: HTTPStreamRead) {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 3000)
        while true {
            let read = buffer.withUnsafeMutableBytes { viewer.read(into: $0, sleep: {}, wake: {}) }
            guard case .bytes(let n) = read else { return (bytes, read) }
            bytes += buffer[..<n]
        }
    }

    @Test func oneFrameFragmentsWithSoundAreAnFMP4FfmpegDecodesWithoutAWord() throws {
        let (movie, samples) = try Self.samples()
        let feed = LiveViewTests.openFeed(movie)
        let sound = LiveSound(feed: feed, log: nil)
        let tone = LiveViewTests.tone(from: LiveViewTests.time(0), until: LiveViewTests.time(80))
        var heard = 0
        for sample in samples[0..<3] {
            var chunks: [AudioChunk] = []
            while heard < tone.count, tone[heard].time <= sample.pts {
                chunks.append(tone[heard])
                heard += 1
            }
            feed.publish(frame: sample, sound: chunks)
        }
        let viewer = LiveFrameViewer(feed: feed, sound: sound, timeline: .continuous) {}
        var bytes = Self.drain(viewer).bytes
        for sample in samples[3..<40] {
            var chunks: [AudioChunk] = []
            while heard < tone.count, tone[heard].time <= sample.pts {
                chunks.append(tone[heard])
                heard += 1
            }
            feed.publish(frame: sample, sound: chunks)
            // A frame at a time, as the server reads it when each is published.
            bytes += Self.drain(viewer).bytes
        }
        let boxes = topLevelBoxes(bytes).map(\.type)
        #expect(boxes.filter { $0 == "moof" }.count == 40, "one fragment a frame: \(boxes.prefix(8))")
        let path = try LiveViewTests.directory.get().file("frames-\(UUID().uuidString).mp4")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let decode = try FFmpeg.decodeErrors(path)
        #expect(decode.isEmpty, "ffmpeg: \(decode)")
        let packets = try FFprobe.videoPackets(path)
        #expect(packets.count == 40 && packets.first?.isKey == true)
        for (i, packet) in packets.enumerated() {
            #expect(abs(packet.time - Double(i) * 0.04) < 0.0001, "frame \(i) at \(packet.time) s")
        }
        #expect(try frameHashes(path).count == 40)
        let sounds = try LiveViewTests.soundPackets(path)
        #expect(sounds.count > 50, "the sound heard with the frames: \(sounds.count) packets of 20 ms")
    }

    /// The issue: the live view answered 503 for its first second (until a whole GOP). Now a
    /// viewer that asks before the first picture is answered, waits, and gets it when it comes.
    @Test func aViewerThatAsksBeforeTheFirstPictureWaitsForItInsteadOfA503() throws {
        let (movie, gops) = try LiveViewTests.stream()
        let context = SinkContext()
        let site = WebSite(camera: "yard", version: "test", storage: MemoryStorage(), context: context)
        context.live.open()
        for path in ["/live.mp4", "/live/edge.mp4"] {
            let answer = site.respond(HTTPRequest(method: "GET", path: path))
            #expect(answer.status == 200, "\(path) before the first picture: \(answer.status)")
            guard case .stream(let stream) = answer.body else {
                Issue.record("\(path): not a stream")
                continue
            }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let woken = Atomic(false)
            let first = buffer.withUnsafeMutableBytes {
                stream.read(into: $0, sleep: {}, wake: { woken.store(true, ordering: .relaxed) })
            }
            #expect(first == .waiting, "\(path): nothing to send yet")
            context.live.begin(movie)
            context.live.publishAsThePipeline(gops[0])
            let wokenNow = woken.load(ordering: .relaxed)
            #expect(wokenNow, "\(path): woken by the first picture")
            let next = buffer.withUnsafeMutableBytes { stream.read(into: $0, sleep: {}, wake: {}) }
            if case .bytes(let n) = next {
                #expect(topLevelBoxes(Array(buffer[..<n])).first?.type == "ftyp", "\(path): the stream begins")
            } else {
                Issue.record("\(path): no picture once it came: \(next)")
            }
            stream.close()
            context.live.interrupt()
        }
    }

    @Test func aFrameViewerThatFellBehindGoesOnFromTheNewestKeyframeNotFromItsBacklog() throws {
        let (movie, samples) = try Self.samples()
        let feed = LiveViewTests.openFeed(movie)
        feed.publish(frame: samples[0])
        let viewer = LiveFrameViewer(feed: feed, sound: nil, timeline: .continuous) {}
        var bytes = Self.drain(viewer).bytes
        feed.publish(frame: samples[1])
        bytes += Self.drain(viewer).bytes
        // Its connection took nothing while 30 frames came (three keyframes): it goes on from
        // the newest keyframe with the GOP in progress, the frames it missed left out.
        for sample in samples[2..<33] { feed.publish(frame: sample) }
        bytes += Self.drain(viewer).bytes
        #expect(viewer.skips == 1)
        let path = try LiveViewTests.directory.get().file("behind-\(UUID().uuidString).mp4")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(try FFmpeg.decodeErrors(path).isEmpty)
        let packets = try FFprobe.videoPackets(path)
        // Frames 0 and 1, then 30, 31, 32: on one timeline without a gap (a player plays on).
        #expect(packets.map(\.isKey) == [true, false, true, false, false])
        for (i, packet) in packets.enumerated() {
            #expect(abs(packet.time - Double(i) * 0.04) < 0.0001, "frame \(i) at \(packet.time) s")
        }
    }
}

extension LiveFeed {
    /// `gop` published as the pipeline publishes it: each access unit as it comes, then the GOP
    /// whole once it is complete.
    func publishAsThePipeline(_ gop: GOP) {
        for sample in gop.samples { publish(frame: sample) }
        publish(gop)
    }
}
