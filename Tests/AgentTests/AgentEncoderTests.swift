import AgentTestSupport
import Capture
import Configuration
import Foundation
import H264
import Media
import Synchronization
import TestSupport
import Testing

@testable import Agent

/// A hardware encoder as the agent sees it, without the hardware: x264 underneath, failing as
/// a device does (`.deviceFailed` after `failAfter` frames: a hang), or refusing to open.
final class FlakyHardwareEncoders: VideoEncoderFactory, Sendable {
    let failAfter: Int?
    let refuse: Bool
    private let opened = Mutex(0)

    init(failAfter: Int? = nil, refuse: Bool = false) {
        self.failAfter = failAfter
        self.refuse = refuse
    }

    var encodersOpened: Int { opened.withLock { $0 } }

    func makeEncoder(for format: VideoFormat) throws(EncoderError) -> any VideoEncoder {
        if refuse {
            throw .openFailed(backend: "v4l2", details: "/dev/video11: VIDIOC_REQBUFS: out of memory for its buffers")
        }
        opened.withLock { $0 += 1 }
        return Flaky(try X264Encoder(format: format, settings: deterministicX264), failAfter: failAfter)
    }

    final class Flaky: VideoEncoder {
        let inner: X264Encoder
        let failAfter: Int?
        var frames = 0
        init(_ inner: X264Encoder, failAfter: Int?) {
            self.inner = inner
            self.failAfter = failAfter
        }
        var sequenceParameterSet: [UInt8] { inner.sequenceParameterSet }
        var pictureParameterSet: [UInt8] { inner.pictureParameterSet }
        var logDescription: [(name: String, value: String)] { [("encoder", "test-hardware")] }
        func encode(_ frame: VideoFrame, keyframe: Bool) throws(EncoderError) -> [EncodedSample] {
            frames += 1
            if let failAfter, frames > failAfter {
                throw .deviceFailed(
                    backend: "v4l2", details: "frame \(frames): the encoder returned nothing for 2000 ms; it is hung")
            }
            return try inner.encode(frame, keyframe: keyframe)
        }
        func flush() throws(EncoderError) -> [EncodedSample] { try inner.flush() }
    }
}

private let deterministicX264 = EncoderSettings(
    preset: .ultrafast, tune: [.zerolatency], profile: .high, crf: 23, rateCap: .uncapped, threads: 1)

/// The hardware encoder as the pipeline uses it, stepped (`EmbeddedAgent`).
@Suite(.serialized) struct AgentEncoderTests {
    /// The agent on `scene` with `hardware` tried before x264.
    func recording(
        _ hardware: FlakyHardwareEncoders, required: Bool = false, scene: SyntheticScene
    ) throws -> EmbeddedAgent {
        try EmbeddedAgent(
            config: testConfig(), openSource: { _ throws(CaptureError) in try synthetic(scene) },
            encoders: EncoderChoice(
                preferred: hardware, fallback: X264EncoderFactory(settings: deterministicX264), required: required,
                announcement: .init(backend: "v4l2", reason: "a test")))
    }

    /// A hardware encoder that hangs: each time the clip is closed (every frame before the
    /// hang is in it) and the encoder opened again; the third time within ten minutes it is
    /// given up for x264, with an error line, and recording goes on.
    @Test func aHardwareEncoderThatKeepsFailingIsGivenUpForX264() throws {
        let hardware = FlakyHardwareEncoders(failAfter: 30)
        let agent = try recording(hardware, scene: scene(seconds: 16, objects: [crossing(0.5, 15)]))
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")

        let failed = agent.events.notices(.hardwareEncoderFailed)
        #expect(failed.count == 3 && failed.allSatisfy { $0.level == .error }, "\(agent.output)")
        #expect(failed.map { $0.field("failures_in_10_min") } == ["1", "2", "3"])
        #expect(agent.events.notices(.hardwareEncoderGivenUp) == [.hardwareEncoderGivenUp(failures: 3)])
        #expect(hardware.encodersOpened == 3)
        let encoders = agent.events.notices(.encoding).compactMap { $0.field("encoder") }
        #expect(encoders == ["test-hardware", "test-hardware", "test-hardware", "x264"], "\(encoders)")
        #expect(agent.events.notices(.encoderChosen).first?.field("backend") == "v4l2")

        // A clip for each stretch the hardware encoder recorded, and one from x264 after.
        let saved = agent.events.clipsSaved.map(\.record)
        #expect(saved.count == 4, "\(agent.output)")
        try agent.expectCompletePlayableClips()
    }

    /// `auto` with a hardware encoder that cannot open for the stream (the Pi's CMA pool
    /// exhausted): a warning, and x264 records from the first frame.
    @Test func aHardwareEncoderThatCannotOpenLeavesTheStreamToX264() throws {
        let hardware = FlakyHardwareEncoders(refuse: true)
        let agent = try recording(hardware, scene: scene(seconds: 5, objects: [crossing(0.5, 3)]))
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        let warned = agent.events.notices(.hardwareEncoderCannotOpen)
        #expect(warned.count == 1 && warned.allSatisfy { $0.field("error")?.contains("out of memory") == true })
        #expect(agent.events.notices(.encoding).compactMap { $0.field("encoder") } == ["x264"])
        #expect(agent.events.clipsSaved.count == 1)
        try agent.expectCompletePlayableClips()
    }

    /// `encoder.backend = "v4l2"`: the hardware encoder was asked for by name, and one that
    /// cannot open for the first stream stops the agent with the device's words.
    @Test func aRequiredHardwareEncoderThatCannotOpenStopsTheAgent() throws {
        let agent = try recording(
            FlakyHardwareEncoders(refuse: true), required: true, scene: scene(seconds: 5, objects: [crossing(0.5, 3)]))
        #expect(agent.runToTheEnd() == .sourceFailed, "\(agent.output)")
        let stopped = agent.events.notices(.encoderFailed)
        #expect(stopped.count == 1 && stopped.allSatisfy { $0.field("error")?.contains("VIDIOC_REQBUFS") == true })
        #expect(agent.clipFiles.isEmpty)
    }
}
