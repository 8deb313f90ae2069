import AgentTestSupport
import Capture
import Foundation
import Media
import QuickTime
import Recorder
import TestSupport
import Testing

@testable import Agent

/// What live viewers get and what the writer's queue holds are a step's output and input
/// (`PipelineOutput.live`, `step(_:writerLoad:)`), not effects inside it: a stepped agent sees
/// every complete GOP, with the sound heard before it, as a value, and sets the writer's load
/// for the frames it wants.
@Suite struct PipelineLiveTests {
    /// 8 s of a quiet 15 fps scene, with 100 ms of sound (16 kHz mono, each chunk's bytes its
    /// number) stepped in as it is captured, before the frame after it.
    @Test func eachCompleteGOPIsAStepOutputWithTheSoundHeardBeforeIt() throws {
        let agent = try EmbeddedAgent()
        let source = try SyntheticSource(scene: scene(seconds: 8, objects: []))
        var chunks: [AudioChunk] = []
        var heardBefore: [Int] = []  // chunks stepped before each GOP came out
        while let frame = try source.nextFrame() {
            while chunks.count < 79, Timestamp(nanoseconds: Int64(chunks.count + 1) * 100_000_000) <= frame.timestamp {
                let chunk = AudioChunk(
                    data: [UInt8](repeating: UInt8(chunks.count), count: 3200),
                    time: Timestamp(nanoseconds: Int64(chunks.count) * 100_000_000), sampleRate: 16000, channels: 1)
                chunks.append(chunk)
                agent.step(.audio(chunk))
            }
            let before = agent.liveGOPs.count
            agent.feed(frame)
            if agent.liveGOPs.count > before { heardBefore.append(chunks.count) }
        }
        agent.step(.end(nil))

        guard case .begin(let movie) = agent.live.first else {
            Issue.record("the stream's format comes first: \(agent.live)")
            return
        }
        #expect(movie.video.width == 320 && movie.video.height == 240 && movie.sound == nil)
        let gops = agent.liveGOPs.map(\.gop)
        let sounds = agent.liveGOPs.map(\.sound)
        // A keyframe a second: every GOP but the last (still open at the end), whole, one after
        // the other, each once.
        let frames = agent.live.compactMap {
            if case .frame(let sample, let sound) = $0 { (sample, sound) } else { nil }
        }
        #expect(
            gops.count == 7 && agent.live.count - frames.count == 9,
            "\(agent.live.count - frames.count) updates besides the frames")
        // Each access unit too, as it came out of the encoder, with the sound heard since the
        // one before: every frame of the 8 s once, in order, every chunk once.
        #expect(frames.count == 120 && frames.map(\.0.pts) == frames.map(\.0.pts).sorted())
        #expect(Array(frames.map(\.0).prefix(105)) == gops.flatMap(\.samples))
        #expect(frames.flatMap(\.1) == Array(chunks.prefix(frames.flatMap(\.1).count)))
        #expect(frames.flatMap(\.1).count >= heardBefore[heardBefore.count - 1])
        #expect(gops.map(\.start.seconds) == [0, 1, 2, 3, 4, 5, 6])
        #expect(gops.allSatisfy { $0.samples[0].isKeyframe && $0.count == 15 })
        #expect(zip(gops, gops.dropFirst()).allSatisfy { $0.end == $1.start })
        // The sound goes with the GOP completed next, in capture order, none lost or repeated.
        #expect(sounds.flatMap { $0 } == Array(chunks[..<heardBefore[heardBefore.count - 1]]))
        for (i, sound) in sounds.enumerated() {
            let from = i == 0 ? 0 : heardBefore[i - 1]
            #expect(sound.map { Int($0.data[0]) } == Array(from..<heardBefore[i]), "GOP \(i)")
        }
    }

    /// The writer's queue over its bound while the GOP from 3 s to 4 s is handed over: that
    /// GOP is dropped whole, the clip keeps its length (the frame before the gap stays on
    /// screen), and live viewers still get every GOP.
    @Test func theWritersLoadGivenToTheStepDropsWholeGOPs() throws {
        func record(loadedFrom: Double?) throws -> (record: ClipRecord, gops: Int, storage: MemoryStorage) {
            let agent = try EmbeddedAgent()
            let source = try SyntheticSource(scene: scene(seconds: 9, objects: [crossing(2, 5)]))
            while let frame = try source.nextFrame() {
                let loaded = loadedFrom.map { frame.timestamp.seconds >= $0 && frame.timestamp.seconds < $0 + 1 }
                agent.writerLoad = loaded == true ? Pipeline.writerBacklogLimit + 1 : 0
                agent.feed(frame)
            }
            agent.step(.end(nil))
            let journal = try agent.journal()
            try #require(journal.count == 1, "\(journal)")
            return (journal[0], agent.liveGOPs.count, agent.storage)
        }
        let whole = try record(loadedFrom: nil)
        let dropped = try record(loadedFrom: 3.5)
        #expect(dropped.record.frames == whole.record.frames - 15, "\(dropped.record) against \(whole.record)")
        #expect(dropped.record.durationSeconds == whole.record.durationSeconds)
        #expect(dropped.gops == whole.gops && whole.gops == 8)
        try TemporaryDirectory.with("vigil-load") { try expectCompletePlayableClips(in: dropped.storage, scratch: $0) }
    }
}

extension EmbeddedAgent {
    /// The complete GOPs live viewers were given, with their sound.
    var liveGOPs: [(gop: GOP, sound: [AudioChunk])] {
        live.compactMap { if case .gop(let gop, let sound) = $0 { (gop, sound) } else { nil } }
    }
}
