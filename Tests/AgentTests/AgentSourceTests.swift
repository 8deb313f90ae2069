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
/// away while a clip is open, one that stalls, one whose frame times leap; a microphone that
/// fails. The camera is `/dev/video-test`, a device path (what makes the agent retry), opened
/// as the test's script says. Stepped (`EmbeddedAgent`): the tries to open a device again fall
/// due on the clock the test moves, and a stall is time passing with no frame.
@Suite struct AgentSourceTests {
    static let camera = "/dev/video-test"

    /// A frame source that stands in for a camera: `scene`'s frames, until its script says
    /// otherwise after `after` frames.
    final class ScriptedCamera: FrameSource {
        enum Then {
            /// The camera is unplugged.
            case lost
            /// The camera's frame times go on this many seconds later: it delivered nothing
            /// meanwhile (a stall), or its clock stepped (a leap: then they arrive as before).
            case gap(Double)
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
            if delivered == after, case .lost = then { throw .deviceLost(source: name, reason: "No such device") }
            delivered += 1
            guard let frame = try frames.nextFrame() else { return nil }
            guard case .gap(let seconds) = then, delivered > after else { return frame }
            return VideoFrame(
                format: frame.format, buffer: frame.buffer, timestamp: frame.timestamp + .init(seconds: seconds),
                sequence: frame.sequence)
        }
    }

    static let notThere = CaptureError.cannotOpen(source: camera, reason: "No such file or directory")

    /// The agent recording from the camera, opened as `script` says.
    static func agent(
        reading script: DeviceScript<OpenedSource>, arrival: @escaping (VideoFrame) -> Timestamp = { $0.timestamp }
    ) throws -> EmbeddedAgent {
        try EmbeddedAgent(
            config: testConfig(device: camera), openSource: { _ throws(CaptureError) in try script.next() },
            arrival: arrival)
    }

    /// Unplugged 3 s into an event (the object crosses from 1 to 6 s), missing for two more
    /// tries (1 s and 3 s after), then back 100 s later with something moving from its first
    /// frame: the open clip is closed at the loss, each state change is said once, and
    /// recording goes on — the event after the return begins after it, not with the motion
    /// before the loss.
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
        let agent = try Self.agent(reading: script)
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        #expect(script.calls == 4)

        // Said once each, in that order: lost (a warning: it retries), back after 3 tries.
        let said = agent.events.changes
        #expect(said.map(\.kind) == [.cameraLost, .cameraBack, .endOfSource], "\(said)")
        #expect(said.first?.level == .warning && said.first?.field("source") == Self.camera, "\(said)")
        #expect(agent.events.notices(.cameraBack).map { $0.field("attempts") } == ["3"])

        // The clip open at the loss was closed there (3 s in, not at the event's end), and
        // the event after the camera came back has its own clip.
        let saved = agent.events.clipsSaved.map(\.record)
        try #require(saved.count == 2, "\(agent.output)")
        #expect(saved[0].durationSeconds <= 3.0 + 1e-9, "\(saved[0])")
        #expect((saved[1].triggerSourceSeconds ?? 0) >= 100, "\(saved[1])")
        #expect(agent.events.clipsStarted.allSatisfy { $0.preRoll >= 0 }, "\(agent.events.clipsStarted)")
        #expect(agent.events.clipsStarted.map(\.event) == [1, 2], "event numbers go on after the loss")
        #expect(agent.events.clipsSaved.map(\.reason) == [.finished, .eventEnded])
        #expect(agent.events.clipsSaved.allSatisfy { $0.origin == .closed })
        #expect(try agent.journal().map(\.file) == saved.map(\.file))
        #expect(agent.clipFiles.count == 2)
        try agent.expectCompletePlayableClips()
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }

    /// No camera at start (a USB camera still enumerating): the agent waits for it, says so
    /// once, and records once it is there.
    @Test func aCameraMissingAtStartIsWaitedFor() throws {
        let script = DeviceScript<OpenedSource> { n throws(CaptureError) in
            guard n >= 3 else { throw Self.notThere }
            return try synthetic(scene(seconds: 8, objects: [crossing(2, 5)]))
        }
        let agent = try Self.agent(reading: script)
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        #expect(script.calls == 3)
        let said = agent.events.changes
        #expect(said.map(\.kind) == [.cameraUnavailable, .cameraOpen, .endOfSource], "\(said)")
        #expect(said.first?.level == .warning, "\(said)")
        #expect(agent.events.notices(.cameraOpen).map { $0.field("attempts") } == ["2"], "\(said)")
        #expect(agent.stats.snapshot.framesIn > 0)
        try agent.expectCompletePlayableClips()
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }

    /// A camera that delivers nothing for 6 s in the middle of an event: once the stall
    /// timeout (5 s, the minimum) has passed with no frame, the open clip is closed; when
    /// frames come again the stream starts afresh, and the motion still going on is a new event
    /// with a clip of its own, triggered after the stall.
    @Test func aStalledCameraClosesTheClipAndFramesStartItAgain() throws {
        let script = DeviceScript<OpenedSource> { _ throws(CaptureError) in
            opened(try ScriptedCamera(scene(seconds: 10, objects: [crossing(1, 8)]), after: 45, then: .gap(6)))
        }
        let agent = try Self.agent(reading: script)
        agent.run { agent.stats.snapshot.framesIn == 45 }
        #expect(agent.events.notices(.sourceStalled).isEmpty)
        agent.advance(seconds: 6)  // six seconds pass with no frame
        #expect(
            agent.events.notices(.sourceStalled) == [.sourceStalled(seconds: 5, closingClip: true)],
            "\(agent.events.notices)")
        #expect(agent.events.notices(.sourceStalled).allSatisfy { $0.level == .warning })
        try #require(!agent.events.clipsSaved.isEmpty, "the clip open at the stall was not closed:\n\(agent.output)")
        #expect(agent.events.notices(.framesAgain).isEmpty)
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")

        #expect(
            agent.events.changes.map(\.kind) == [.sourceStalled, .framesAgain, .endOfSource],
            "\(agent.events.notices)")
        let reasons = agent.events.clipsSaved.map(\.reason)
        #expect(reasons.count == 2 && reasons.first == .finished, "\(agent.output)")
        #expect(script.calls == 1, "a stall is not a lost camera: it is not reopened")
        let saved = agent.events.clipsSaved.map(\.record)
        #expect(saved.count == 2 && (saved.last?.triggerSourceSeconds ?? 0) >= 3, "\(saved)")
        #expect(agent.events.clipsStarted.allSatisfy { $0.preRoll >= 0 }, "\(agent.events.clipsStarted)")
        #expect(agent.clipFiles.count == 2)
        try agent.expectCompletePlayableClips()
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }

    /// Frame times that leap 20 s ahead in the middle of an event while the frames keep
    /// coming 1/15 s apart (a process stopped and continued, a driver whose clock stepped): the
    /// clip open before the leap ends with its last frame (no picture frozen for 20 s), and the
    /// motion after it is a new event, with its own number and a clip that starts at or before
    /// its trigger.
    @Test func framesThatLeapAheadEndTheClipBeforeTheLeap() throws {
        let script = DeviceScript<OpenedSource> { _ throws(CaptureError) in
            opened(try ScriptedCamera(scene(seconds: 10, objects: [crossing(1, 8)]), after: 45, then: .gap(20)))
        }
        // Each frame arrives at its time before the leap.
        let agent = try Self.agent(reading: script) { frame in .s(Double(frame.sequence) / 15) }
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")

        let jumped = agent.events.notices(.frameTimesJumped)
        guard jumped.count == 1, case .frameTimesJumped(let seconds, let closingClip) = jumped[0] else {
            Issue.record("\(agent.events.notices)")
            return
        }
        #expect(jumped[0].level == .warning && closingClip && abs(seconds - 20.067) < 0.01, "\(jumped)")
        #expect(agent.events.notices(.sourceStalled).isEmpty, "frames kept coming")
        let saved = agent.events.clipsSaved.map(\.record)
        try #require(saved.count == 2, "\(agent.output)")
        // The first clip ends with the last frame before the leap: 3 s of frames (0 … 2.933 s).
        #expect(saved[0].durationSeconds <= 3.0 + 1e-9, "\(saved[0])")
        #expect(saved[1].durationSeconds < 10, "\(saved[1])")
        #expect((saved[1].triggerSourceSeconds ?? 0) >= 23, "\(saved[1])")
        #expect(agent.events.clipsStarted.map(\.event) == [1, 2])
        #expect(agent.events.clipsStarted.allSatisfy { $0.preRoll >= 0 }, "\(agent.events.clipsStarted)")
        try agent.expectCompletePlayableClips()
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }

    /// The wall clock is stepped an hour ahead between two events (NTP setting the clock of a
    /// board that booted without a clock battery): the clip after it is named, stamped and
    /// triggered by the new time — said once — and the clip before it kept the old. The
    /// camera's frames are on the agent's clock, as a camera's are on the monotonic clock.
    @Test func aSteppedWallClockNamesTheClipsAfterIt() throws {
        let step = Mutex(0.0)
        let agent = try EmbeddedAgent(
            config: testConfig(device: Self.camera),
            openSource: { _ throws(CaptureError) in
                try synthetic(scene(seconds: 12, objects: [crossing(1, 3), crossing(7, 9)]))
            },
            onEvent: { event in
                if case .clipSaved = event { step.withLock { $0 = 3600 } }
            },
            wall: { EmbeddedAgent.wallOrigin.addingTimeInterval($0.seconds + step.withLock { $0 }) })
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")

        let moved = agent.events.notices(.wallClockMoved)
        guard moved.count == 1, case .wallClockMoved(let seconds) = moved[0] else {
            Issue.record("\(agent.events.notices)")
            return
        }
        #expect(abs(seconds - 3600) < 2, "\(moved)")
        let started = agent.events.clipsStarted
        try #require(started.count == 2, "\(agent.output)")
        let apart = started[1].trigger.timeIntervalSince(started[0].trigger)
        #expect(apart > 3600 && apart < 3600 + 60, "triggers \(apart) s apart")
        let saved = agent.events.clipsSaved.map(\.record)
        try #require(saved.count == 2)
        #expect(saved[0].file < saved[1].file, "\(saved.map(\.file))")
        #expect(saved.allSatisfy { $0.preRollSeconds.map { $0 >= 0 } ?? false })
        try agent.expectCompletePlayableClips()
        #expect(agent.errors.isEmpty, "\(agent.errors)")
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
        let clock = ManualClock()
        // The clock's reading at each try.
        let tries = Mutex<[Double]>([])
        let microphone = DeviceScript<any AudioSource> { n throws(CaptureError) in
            tries.withLock { $0.append(clock.now.seconds) }
            guard n == 3 else { throw .cannotOpen(source: "test-mic", reason: "No such device") }
            return LostMicrophone()
        }
        let agent = try EmbeddedAgent(
            config: testConfig(extra: #"audio = { enabled = true; device = "test-mic"; };"#), clock: clock,
            openSource: { _ throws(CaptureError) in try synthetic(AgentRunTests.endless(period: 10)) },
            openMicrophone: { _ throws(CaptureError) in try microphone.next() })
        #expect(agent.run { microphone.calls >= 6 }, "\(agent.output)")
        agent.stop()
        #expect(agent.outcome == .stopped)

        let at = tries.withLock { $0 }
        let waits = zip(at.dropFirst(), at).prefix(5).map { (($0 - $1) * 100).rounded() / 100 }
        #expect(waits == [1, 2, 1, 2, 4], "seconds waited before each try")
        // Each change said once: unavailable, back (opened after failing), failed.
        let said = agent.events.changes.filter { $0.kind != .endOfSource }
        #expect(said.map(\.kind) == [.microphoneUnavailable, .microphoneBack, .microphoneFailed], "\(said)")
        #expect(said.filter { $0.kind != .microphoneBack }.allSatisfy { $0.level == .warning }, "\(said)")
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }
}
