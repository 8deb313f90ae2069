import AgentTestSupport
import Capture
import Configuration
import Foundation
import Media
import Recorder
import Synchronization
import TestSupport
import Testing

@testable import Agent

/// Sources that fail in the agent's hands: a camera that is not there yet, one that goes
/// away while a clip is open, one that stalls. The camera is `/dev/video-test`, a device path
/// (what makes the agent retry), opened as the test's script says; the waits between tries
/// return at once.
@Suite(.serialized) struct AgentSourceTests {
    static let camera = "/dev/video-test"

    /// A frame source that stands in for a camera: `scene`'s frames, until its script says
    /// otherwise after `after` frames.
    final class ScriptedCamera: FrameSource {
        enum Then {
            /// The camera is unplugged.
            case lost
            /// The camera delivers nothing until `resume` is signalled.
            case stall(resume: DispatchSemaphore)
            /// The camera's frame times leap ahead by this many seconds (the process was
            /// stopped and continued; the driver's clock stepped).
            case leap(Double)
        }

        private let frames: SyntheticSource
        private let after: Int
        private let then: Then
        private var delivered = 0

        init(_ scene: SyntheticScene, after: Int, then: Then) throws(CaptureError) {
            frames = try SyntheticSource(scene: scene)
            self.after = after
            self.then = then
        }

        var format: VideoFormat { frames.format }
        var name: String { AgentSourceTests.camera }

        func nextFrame() throws(CaptureError) -> VideoFrame? {
            if delivered == after {
                switch then {
                case .lost: throw .deviceLost(source: name, reason: "No such device")
                case .stall(let resume): resume.wait()
                case .leap: break
                }
            }
            delivered += 1
            guard let frame = try frames.nextFrame() else { return nil }
            guard case .leap(let seconds) = then, delivered > after else { return frame }
            return VideoFrame(
                format: frame.format, buffer: frame.buffer, timestamp: frame.timestamp + .init(seconds: seconds),
                sequence: frame.sequence)
        }
    }

    static let notThere = CaptureError.cannotOpen(source: camera, reason: "No such file or directory")

    /// The agent recording from the camera, opened as `script` says.
    static func agent(reading script: DeviceScript<OpenedSource>) throws -> AgentHarness {
        try AgentHarness(
            config: testConfig(device: camera), openSource: { _ throws(CaptureError) in try script.next() })
    }

    /// Unplugged 3 s into an event (the object crosses from 1 to 6 s), missing for two more
    /// tries, then back 100 s later with something moving from its first frame: the open clip
    /// is closed at the loss, each state change is said once, and recording goes on — the
    /// event after the return begins after it, not with the motion before the loss.
    @Test func aCameraLostWhileRecordingIsRetriedAndRecordingGoesOn() throws {
        let script = DeviceScript<OpenedSource> { n throws(CaptureError) in
            switch n {
            case 1:
                return opened(try ScriptedCamera(scene(seconds: 10, objects: [crossing(1, 6)]), after: 45, then: .lost))
            case 2, 3: throw Self.notThere
            default:
                var later = scene(seconds: 8, objects: [crossing(0, 4)])
                later.startTime = .s(100)  // a camera's clock goes on while it is away
                return try synthetic(later)
            }
        }
        let harness = try Self.agent(reading: script)
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")
        #expect(script.calls == 4)

        let lost = harness.lines("camera lost; closing the clip and retrying")
        let back = harness.lines("camera back")
        #expect(lost.count == 1 && lost.allSatisfy { logValue($0, "level") == "warning" }, "\(harness.output)")
        #expect(back.count == 1 && back.allSatisfy { logValue($0, "attempts") == "3" }, "\(back)")
        let lines = harness.logs.written
        #expect((lines.firstIndex { lost.contains($0) } ?? .max) < (lines.firstIndex { back.contains($0) } ?? -1))
        #expect(harness.lines("camera unavailable; waiting for it").isEmpty)

        // The clip open at the loss was closed there (3 s in, not at the event's end), and
        // the event after the camera came back has its own clip.
        let saved = harness.events.clipsSaved.map(\.record)
        try #require(saved.count == 2, "\(harness.output)")
        #expect(saved[0].durationSeconds <= 3.0 + 1e-9, "\(saved[0])")
        #expect((saved[1].triggerSourceSeconds ?? 0) >= 100, "\(saved[1])")
        #expect(harness.events.clipsStarted.allSatisfy { $0.preRoll >= 0 }, "\(harness.events.clipsStarted)")
        #expect(harness.events.clipsStarted.map(\.event) == [1, 2], "event numbers go on after the loss")
        #expect(harness.lines("clip saved").map { logValue($0, "reason") } == ["stopped", "post_roll over"])
        #expect(harness.events.clipsSaved.allSatisfy { $0.origin == .closed })
        #expect(try harness.journal().map(\.file) == saved.map(\.file))
        #expect(harness.clipFiles.count == 2)
        try harness.expectCompletePlayableClips()
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }

    /// No camera at start (a USB camera still enumerating): the agent waits for it, says so
    /// once, and records once it is there.
    @Test func aCameraMissingAtStartIsWaitedFor() throws {
        let script = DeviceScript<OpenedSource> { n throws(CaptureError) in
            guard n >= 3 else { throw Self.notThere }
            return try synthetic(scene(seconds: 8, objects: [crossing(2, 5)]))
        }
        let harness = try Self.agent(reading: script)
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")
        #expect(script.calls == 3)
        let waiting = harness.lines("camera unavailable; waiting for it")
        #expect(waiting.count == 1 && waiting.allSatisfy { logValue($0, "level") == "warning" }, "\(harness.output)")
        let open = harness.lines("camera open")
        #expect(open.count == 1 && open.allSatisfy { logValue($0, "attempts") == "2" }, "\(open)")
        #expect(harness.lines("camera back").isEmpty)
        #expect(harness.lines("vigil stopped").allSatisfy { (logValue($0, "frames").flatMap { Int($0) } ?? 0) > 0 })
        try harness.expectCompletePlayableClips()
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }

    /// A camera that delivers nothing in the middle of an event: after the stall timeout
    /// (5 s, the minimum: this test waits that long) the open clip is closed; when frames come
    /// again the stream starts afresh, and the motion still going on is a new event with a
    /// clip of its own, triggered after the stall.
    @Test func aStalledCameraClosesTheClipAndFramesStartItAgain() throws {
        let resume = DispatchSemaphore(value: 0)
        defer { resume.signal() }
        let script = DeviceScript<OpenedSource> { _ throws(CaptureError) in
            opened(
                try ScriptedCamera(
                    scene(seconds: 10, objects: [crossing(1, 8)]), after: 45, then: .stall(resume: resume)))
        }
        let harness = try Self.agent(reading: script)
        harness.start()
        defer { _ = harness.stopAndWait() }
        try #require(harness.waitFor("the source delivered nothing"), "\(harness.output)")
        let stall = harness.lines("the source delivered nothing")
        #expect(
            stall.allSatisfy { logValue($0, "closing_clip") == "true" && logValue($0, "level") == "warning" },
            "\(stall)")
        #expect(stall.allSatisfy { logValue($0, "seconds") == "5.000" }, "\(stall)")
        try #require(harness.waitFor("clip saved"), "the clip open at the stall was not closed:\n\(harness.output)")
        #expect(harness.lines("frames again").isEmpty)
        resume.signal()
        #expect(harness.waitForOutcome() == .stopped, "\(harness.output)")

        #expect(
            harness.lines("the source delivered nothing").count == 1 && harness.lines("frames again").count == 1,
            "\(harness.output)")
        let reasons = harness.lines("clip saved").map { logValue($0, "reason") }
        #expect(reasons.count == 2 && reasons.first == "stopped", "\(harness.output)")
        #expect(script.calls == 1, "a stall is not a lost camera: it is not reopened")
        let saved = harness.events.clipsSaved.map(\.record)
        #expect(saved.count == 2 && (saved.last?.triggerSourceSeconds ?? 0) >= 3, "\(saved)")
        #expect(harness.events.clipsStarted.allSatisfy { $0.preRoll >= 0 }, "\(harness.events.clipsStarted)")
        #expect(harness.clipFiles.count == 2)
        try harness.expectCompletePlayableClips()
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }

    /// Frame times that leap 20 s ahead in the middle of an event (a process stopped and
    /// continued, a driver whose clock stepped): the clip open before the leap ends with its
    /// last frame (no picture frozen for 20 s), and the motion after it is a new event, with
    /// its own number and a clip that starts at or before its trigger.
    @Test func framesThatLeapAheadEndTheClipBeforeTheLeap() throws {
        let script = DeviceScript<OpenedSource> { _ throws(CaptureError) in
            opened(try ScriptedCamera(scene(seconds: 10, objects: [crossing(1, 8)]), after: 45, then: .leap(20)))
        }
        let harness = try Self.agent(reading: script)
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")

        let jumped = harness.lines(
            "the frame times jumped; what was recorded ends before the jump and the stream starts afresh")
        #expect(
            jumped.count == 1
                && jumped.allSatisfy {
                    logValue($0, "level") == "warning" && logValue($0, "closing_clip") == "true"
                        && logValue($0, "seconds").flatMap(Double.init).map { abs($0 - 20.067) < 0.01 } == true
                },
            "\(harness.output)")
        let saved = harness.events.clipsSaved.map(\.record)
        try #require(saved.count == 2, "\(harness.output)")
        // The first clip ends with the last frame before the leap: 3 s of frames (0 … 2.933 s).
        #expect(saved[0].durationSeconds <= 3.0 + 1e-9, "\(saved[0])")
        #expect(saved[1].durationSeconds < 10, "\(saved[1])")
        #expect((saved[1].triggerSourceSeconds ?? 0) >= 23, "\(saved[1])")
        #expect(harness.events.clipsStarted.map(\.event) == [1, 2])
        #expect(harness.events.clipsStarted.allSatisfy { $0.preRoll >= 0 }, "\(harness.events.clipsStarted)")
        try harness.expectCompletePlayableClips()
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }

    /// Frames stamped on the monotonic clock, as a camera's are: `scene`'s frames moved to start
    /// when the source is opened (read as fast as the agent takes them).
    final class MonotonicCamera: FrameSource {
        private let frames: SyntheticSource
        private let shift: Timestamp.Duration

        init(_ scene: SyntheticScene) throws(CaptureError) {
            frames = try SyntheticSource(scene: scene)
            shift = MonotonicClock.now() - scene.startTime
        }

        var format: VideoFormat { frames.format }
        var name: String { AgentSourceTests.camera }

        func nextFrame() throws(CaptureError) -> VideoFrame? {
            guard let frame = try frames.nextFrame() else { return nil }
            return VideoFrame(
                format: frame.format, buffer: frame.buffer, timestamp: frame.timestamp + shift,
                sequence: frame.sequence)
        }
    }

    /// The wall clock is stepped an hour ahead between two events (NTP setting the clock of a
    /// board that booted without a clock battery): the clip after it is named, stamped and
    /// triggered by the new time — said once — and the clip before it kept the old.
    @Test func aSteppedWallClockNamesTheClipsAfterIt() throws {
        let step = Mutex(0.0)
        let harness = try AgentHarness(
            config: testConfig(device: Self.camera),
            openSource: { _ throws(CaptureError) in
                opened(try MonotonicCamera(scene(seconds: 12, objects: [crossing(1, 3), crossing(7, 9)])))
            },
            onEvent: { event in
                if case .clipSaved = event { step.withLock { $0 = 3600 } }
            },
            wallNow: { Date().addingTimeInterval(step.withLock { $0 }) })
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")

        let moved = harness.lines("the wall clock moved; clip names and times follow it")
        #expect(
            moved.count == 1
                && moved.allSatisfy { logValue($0, "seconds").flatMap(Double.init).map { abs($0 - 3600) < 2 } == true },
            "\(harness.output)")
        let started = harness.events.clipsStarted
        try #require(started.count == 2, "\(harness.output)")
        let apart = started[1].trigger.timeIntervalSince(started[0].trigger)
        #expect(apart > 3600 && apart < 3600 + 60, "triggers \(apart) s apart")
        let saved = harness.events.clipsSaved.map(\.record)
        try #require(saved.count == 2)
        #expect(saved[0].file < saved[1].file, "\(saved.map(\.file))")
        #expect(saved.allSatisfy { $0.preRollSeconds.map { $0 >= 0 } ?? false })
        try harness.expectCompletePlayableClips()
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }

    /// A microphone that opens but whose first read fails (unplugged as it was opened).
    final class LostMicrophone: AudioSource {
        var sampleRate: Int { 48000 }
        var channels: Int { 1 }
        var name: String { "test-mic" }
        func read() throws(CaptureError) -> AudioChunk? { throw .deviceLost(source: name, reason: "No such device") }
    }

    /// A microphone missing at start, then there but failing at once, then gone: each change
    /// is said once, and it is tried again as the camera is — 1 s after it failed, then 2, 4 …
    @Test func aMicrophoneThatFailsIsRetriedWithBackoff() throws {
        // The seconds the agent had waited when it made each try.
        let waited = Mutex<(total: Double, atTries: [Double])>((0, []))
        let microphone = DeviceScript<any AudioSource> { n throws(CaptureError) in
            waited.withLock { $0.atTries.append($0.total) }
            guard n == 3 else { throw .cannotOpen(source: "test-mic", reason: "No such device") }
            return LostMicrophone()
        }
        let harness = try AgentHarness(
            config: testConfig(extra: #"audio = { enabled = true; device = "test-mic"; };"#),
            openSource: { _ throws(CaptureError) in try synthetic(AgentRunTests.endless(period: 10)) },
            openMicrophone: { _ throws(CaptureError) in try microphone.next() },
            sleep: { seconds in waited.withLock { $0.total += seconds } })
        harness.start()
        defer { _ = harness.stopAndWait() }
        try #require(harness.waitUntil { microphone.calls >= 6 }, "\(harness.output)")
        #expect(harness.stopAndWait() == .stopped)

        let tries = waited.withLock { $0.atTries }
        let waits = zip(tries.dropFirst(), tries).prefix(5).map { (($0 - $1) * 100).rounded() / 100 }
        #expect(waits == [1, 2, 1, 2, 4], "seconds waited before each try")
        let unavailable = harness.lines("microphone unavailable; recording video only")
        let failed = harness.lines("microphone failed; recording video only until it is back")
        #expect(unavailable.count == 1 && failed.count == 1, "\(harness.output)")
        #expect((unavailable + failed).allSatisfy { logValue($0, "level") == "warning" })
        #expect(
            harness.lines("microphone back").count == 1 && harness.lines("microphone open").isEmpty, "\(harness.output)"
        )
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }
}
