import Capture
import Configuration
import FoundationEssentials
import Logging
import Media
import Recorder
import Storage

/// What the agent runs on: the devices, the disk, the clocks, where logs and events go. The
/// system's (`system(encoders:)`) for `vigil run`; tests pass their own — a synthetic source
/// read as fast as it goes, an in-memory disk that fills up on cue, a sleep that does not.
public struct AgentEnvironment: Sendable {
    /// Make the encoder once the source's format is known: the hardware one first when there
    /// is one, x264 otherwise and after it is given up (`encoder.backend`).
    public var encoders: EncoderChoice
    /// Opens the source for recording.
    public var openSource: @Sendable (Settings.Camera) throws(CaptureError) -> OpenedSource
    /// Opens the microphone; `log` is for what it negotiated.
    public var openMicrophone: @Sendable (Settings.Audio, Logger) throws(CaptureError) -> any AudioSource
    /// The storage directory at a path.
    public var storage: @Sendable (String) -> any ClipStorage
    /// Where log lines go.
    public var logSink: any LogSink
    /// Sinks beyond the events journal and the hooks, which the agent always has.
    public var sinks: [any EventSink] = []
    /// Video the writer keeps in memory while the disk is full or not there, at most.
    public var memoryForWaitingVideo = DiskFullPolicy.memoryLimit
    /// Where outside requests come in (`vigil trigger`, MQTT's command topics).
    public var control = AgentControl()
    /// Where `vigil trigger`'s socket may go (`TriggerSocket.directories`); nil: no socket.
    public var triggerDirectories: [String]? = nil
    /// Whether the agent takes SIGTERM, SIGINT and SIGHUP itself (`vigil run`), or is stopped
    /// and reloaded only by `stop` and `reload` (tests).
    public var handlesSignals: Bool
    /// systemd's notification socket (ready, watchdog, stopping), when there is one.
    public var notifier: SystemdNotifier
    /// The monotonic clock capture timestamps are on, and the wall clock.
    public var monotonicNow: @Sendable () -> Timestamp
    public var wallNow: @Sendable () -> Date
    /// Waits this many seconds (between tries to reopen a camera or a microphone); the agent
    /// passes short waits and checks for a stop between them.
    public var sleep: @Sendable (Double) -> Void

    /// `encoders` records alone (x264), unannounced; set `self.encoders` for a hardware one.
    public init(
        encoders: any VideoEncoderFactory,
        openSource: @escaping @Sendable (Settings.Camera) throws(CaptureError) -> OpenedSource,
        openMicrophone: @escaping @Sendable (Settings.Audio, Logger) throws(CaptureError) -> any AudioSource,
        storage: @escaping @Sendable (String) -> any ClipStorage, logSink: any LogSink, sinks: [any EventSink] = [],
        triggerDirectories: [String]? = nil, handlesSignals: Bool, notifier: SystemdNotifier,
        monotonicNow: @escaping @Sendable () -> Timestamp, wallNow: @escaping @Sendable () -> Date,
        sleep: @escaping @Sendable (Double) -> Void
    ) {
        self.encoders = EncoderChoice(fallback: encoders)
        self.openSource = openSource
        self.openMicrophone = openMicrophone
        self.storage = storage
        self.logSink = logSink
        self.sinks = sinks
        self.triggerDirectories = triggerDirectories
        self.handlesSignals = handlesSignals
        self.notifier = notifier
        self.monotonicNow = monotonicNow
        self.wallNow = wallNow
        self.sleep = sleep
    }

    /// The machine's own: V4L2 cameras and ALSA microphones (or the synthetic ones), the disk,
    /// stderr (the journal under systemd), sd_notify, signals.
    public static func system(encoders: EncoderChoice) -> AgentEnvironment {
        var environment = AgentEnvironment(
            encoders: encoders.fallback,
            openSource: { camera throws(CaptureError) in
                try SourceOpener.open(
                    camera.device, width: camera.width, height: camera.height, fps: camera.fps,
                    purpose: .recording(realtime: camera.realtime))
            },
            openMicrophone: { audio, log throws(CaptureError) in
                if audio.device == "synthetic" {
                    return SyntheticAudioSource(sampleRate: audio.rate, channels: audio.channels)
                }
                let microphone = try ALSAMicrophone(
                    device: audio.device, sampleRate: audio.rate, channels: audio.channels)
                log.info(
                    "microphone negotiated",
                    [
                        ("device", .string(microphone.name)), ("rate", .int(microphone.sampleRate)),
                        ("requested_rate", .int(microphone.requestedRate)), ("channels", .int(microphone.channels)),
                        ("period_frames", .int(microphone.periodFrames)),
                        ("buffer_frames", .int(microphone.bufferFrames)),
                        ("driver_timestamps", .bool(microphone.driverTimestamps)),
                    ])
                return microphone
            },
            storage: { DiskStorage(root: $0) },
            logSink: StderrLogSink(),
            triggerDirectories: TriggerSocket.directories(),
            handlesSignals: true,
            notifier: SystemdNotifier(),
            monotonicNow: { MonotonicClock.now() },
            wallNow: { Date() },
            sleep: { MonotonicClock.sleep(until: MonotonicClock.now() + .init(seconds: $0)) })
        environment.encoders = encoders
        return environment
    }
}
