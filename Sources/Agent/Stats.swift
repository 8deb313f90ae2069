import Logging
import Synchronization

/// Counters the pipeline threads update and the stats line reports. Totals since start; the
/// stats line shows the change since the previous line.
public struct Counters: Sendable, Equatable {
    /// Frames the source delivered.
    public var framesIn = 0
    /// Frames lost before Vigil saw them (gaps in the camera's sequence numbers).
    public var framesLostAtSource = 0
    /// Frames dropped because the pipeline fell behind the camera (capture queue full).
    public var framesDroppedAtCapture = 0
    /// Frames encoded.
    public var framesEncoded = 0
    /// Encoded video samples not written because the disk fell behind (writer queue full).
    public var samplesDroppedAtWriter = 0
    /// Seconds spent in the encoder.
    public var encodeSeconds = 0.0
    /// Seconds spent detecting motion.
    public var detectSeconds = 0.0
    public var lastScore = 0.0
    public var peakScore = 0.0
    public var ringSeconds = 0.0
    public var ringBytes = 0
    public var clipsWritten = 0
    public var clipErrors = 0
    public var diskFreeBytes: Int64 = 0
    public var recording = false
    /// Microphone overruns recovered (sound lost while the pipeline fell behind).
    public var audioOverruns = 0

    public init() {}
}

final class Stats: Sendable {
    private let counters = Mutex(Counters())

    func update(_ change: (inout Counters) -> Void) {
        counters.withLock { change(&$0) }
    }

    public var snapshot: Counters { counters.withLock { $0 } }

    /// The stats line: rates over the report's seconds since its previous counters, and the state now.
    static func line(_ report: StatsReport) -> [(String, LogValue)] {
        let (now, previous, seconds) = (report.now, report.previous, report.seconds)
        let frames = now.framesIn - previous.framesIn
        let encoded = now.framesEncoded - previous.framesEncoded
        let encodeMs = encoded > 0 ? (now.encodeSeconds - previous.encodeSeconds) * 1000 / Double(encoded) : 0
        let detectMs = encoded > 0 ? (now.detectSeconds - previous.detectSeconds) * 1000 / Double(encoded) : 0
        return [
            ("fps_in", .fixed(seconds > 0 ? Double(frames) / seconds : 0, 1)),
            ("fps_out", .fixed(seconds > 0 ? Double(encoded) / seconds : 0, 1)),
            ("lost_at_source", .int(now.framesLostAtSource - previous.framesLostAtSource)),
            ("dropped_at_capture", .int(now.framesDroppedAtCapture - previous.framesDroppedAtCapture)),
            ("dropped_at_writer", .int(now.samplesDroppedAtWriter - previous.samplesDroppedAtWriter)),
            ("encode_ms", .fixed(encodeMs, 2)),
            ("detect_ms", .fixed(detectMs, 3)),
            ("score", .fixed(now.lastScore, 4)),
            ("peak_score", .fixed(now.peakScore, 4)),
            ("ring_s", .fixed(now.ringSeconds, 1)),
            ("ring_bytes", .int(now.ringBytes)),
            ("recording", .bool(now.recording)),
            ("audio_overruns", .int(now.audioOverruns - previous.audioOverruns)),
            ("clips", .int(now.clipsWritten)),
            ("clip_errors", .int(now.clipErrors)),
            ("disk_free_mb", .int(now.diskFreeBytes >> 20)),
        ]
    }
}
