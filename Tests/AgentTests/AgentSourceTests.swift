import AgentTestSupport
import Capture
import Configuration
import Foundation
import Media
import POSIX
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

        // Said once each, in that order: lost (a warning: it retries), back after 3 tries.
        let said = harness.events.changes
        #expect(said.map(\.kind) == [.cameraLost, .cameraBack, .endOfSource], "\(said)")
        #expect(said.first?.level == .warning && said.first?.field("source") == Self.camera, "\(said)")
        #expect(harness.events.notices(.cameraBack).map { $0.field("attempts") } == ["3"])

        // The clip open at the loss was closed there (3 s in, not at the event's end), and
        // the event after the camera came back has its own clip.
        let saved = harness.events.clipsSaved.map(\.record)
        try #require(saved.count == 2, "\(harness.output)")
        #expect(saved[0].durationSeconds <= 3.0 + 1e-9, "\(saved[0])")
        #expect((saved[1].triggerSourceSeconds ?? 0) >= 100, "\(saved[1])")
        #expect(harness.events.clipsStarted.allSatisfy { $0.preRoll >= 0 }, "\(harness.events.clipsStarted)")
        #expect(harness.events.clipsStarted.map(\.event) == [1, 2], "event numbers go on after the loss")
        #expect(harness.events.clipsSaved.map(\.reason) == [.finished, .eventEnded])
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
        let said = harness.events.changes
        #expect(said.map(\.kind) == [.cameraUnavailable, .cameraOpen, .endOfSource], "\(said)")
        #expect(said.first?.level == .warning, "\(said)")
        #expect(harness.events.notices(.cameraOpen).map { $0.field("attempts") } == ["2"], "\(said)")
        #expect(harness.agent.stats.snapshot.framesIn > 0)
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
        try #require(harness.waitUntil { !harness.events.notices(.sourceStalled).isEmpty }, "\(harness.output)")
        #expect(
            harness.events.notices(.sourceStalled) == [.sourceStalled(seconds: 5, closingClip: true)],
            "\(harness.events.notices)")
        #expect(harness.events.notices(.sourceStalled).allSatisfy { $0.level == .warning })
        try #require(
            harness.waitUntil { !harness.events.clipsSaved.isEmpty },
            "the clip open at the stall was not closed:\n\(harness.output)")
        #expect(harness.events.notices(.framesAgain).isEmpty)
        resume.signal()
        #expect(harness.waitForOutcome() == .stopped, "\(harness.output)")

        #expect(
            harness.events.changes.map(\.kind) == [.sourceStalled, .framesAgain, .endOfSource],
            "\(harness.events.notices)")
        let reasons = harness.events.clipsSaved.map(\.reason)
        #expect(reasons.count == 2 && reasons.first == .finished, "\(harness.output)")
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

        let jumped = harness.events.notices(.frameTimesJumped)
        guard jumped.count == 1, case .frameTimesJumped(let seconds, let closingClip) = jumped[0] else {
            Issue.record("\(harness.events.notices)")
            return
        }
        #expect(jumped[0].level == .warning && closingClip && abs(seconds - 20.067) < 0.01, "\(jumped)")
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
            shift = Clock.monotonic.now() - scene.startTime
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

        let moved = harness.events.notices(.wallClockMoved)
        guard moved.count == 1, case .wallClockMoved(let seconds) = moved[0] else {
            Issue.record("\(harness.events.notices)")
            return
        }
        #expect(abs(seconds - 3600) < 2, "\(moved)")
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
        // Each change said once: unavailable, back (opened after failing), failed.
        let said = harness.events.changes.filter { $0.kind != .endOfSource }
        #expect(said.map(\.kind) == [.microphoneUnavailable, .microphoneBack, .microphoneFailed], "\(said)")
        #expect(said.filter { $0.kind != .microphoneBack }.allSatisfy { $0.level == .warning }, "\(said)")
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }
}
