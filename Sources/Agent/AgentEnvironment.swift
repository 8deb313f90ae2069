import Capture
import Configuration
import FoundationEssentials
import Logging
import Media
import POSIX
import Recorder

/// What the agent runs on: the devices, the disk, the clocks, where logs and events go.
/// `vigil run` (`RunCommand`, the one composition root) makes the machine's own; tests pass
/// their own — a synthetic source read as fast as it goes, an in-memory disk that fills up on
/// cue. (A test of the agent's logic steps it on a clock it moves instead: `EmbeddedAgent`.)
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
    /// The agent's logger (`Logger.agent`): the one every part of it, and the sinks, write to.
    public var log: Logger
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
    public var notifier: SystemdNotifier?
    /// The clock every reading of time in the agent goes through (`Clock.monotonic`, which
    /// capture timestamps are on; a test's manual clock), and the wall clock.
    public var clock: Clock
    public var wallNow: @Sendable () -> Date

    /// `encoders` records alone (x264), unannounced; set `self.encoders` for a hardware one.
    public init(
        encoders: any VideoEncoderFactory,
        openSource: @escaping @Sendable (Settings.Camera) throws(CaptureError) -> OpenedSource,
        openMicrophone: @escaping @Sendable (Settings.Audio, Logger) throws(CaptureError) -> any AudioSource,
        storage: @escaping @Sendable (String) -> any ClipStorage, log: Logger, sinks: [any EventSink] = [],
        triggerDirectories: [String]? = nil, handlesSignals: Bool, notifier: SystemdNotifier? = nil,
        clock: Clock, wallNow: @escaping @Sendable () -> Date
    ) {
        self.encoders = EncoderChoice(fallback: encoders)
        self.openSource = openSource
        self.openMicrophone = openMicrophone
        self.storage = storage
        self.log = log
        self.sinks = sinks
        self.triggerDirectories = triggerDirectories
        self.handlesSignals = handlesSignals
        self.notifier = notifier
        self.clock = clock
        self.wallNow = wallNow
    }
}

extension Logger {
    /// The agent's logger: `log.level`, every line naming the camera. Made once, by the
    /// composition root (or a test), and shared by the agent and its sinks, so a reload's
    /// `log.level` reaches them all.
    public static func agent(_ settings: Settings, sink: any LogSink) -> Logger {
        Logger(level: settings.log.level, sink: sink, metadata: [("camera", .string(settings.camera.name))])
    }
}
