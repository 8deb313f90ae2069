import Logging
import Synchronization

/// Counters the pipeline threads update and the stats line reports. Totals since start; the
/// stats line shows the change since the previous line.
struct Counters: Sendable, Equatable {
    /// Frames the source delivered.
    var framesIn = 0
    /// Frames lost before Vigil saw them (gaps in the camera's sequence numbers).
    var framesLostAtSource = 0
    /// Frames dropped because the pipeline fell behind the camera (capture queue full).
    var framesDroppedAtCapture = 0
    /// Frames encoded.
    var framesEncoded = 0
    /// Encoded video samples not written because the disk fell behind (writer queue full).
    var samplesDroppedAtWriter = 0
    /// Seconds spent in the encoder.
    var encodeSeconds = 0.0
    /// Seconds spent detecting motion.
    var detectSeconds = 0.0
    var lastScore = 0.0
    var peakScore = 0.0
    var ringSeconds = 0.0
    var ringBytes = 0
    var clipsWritten = 0
    var clipErrors = 0
    var diskFreeBytes: Int64 = 0
    var recording = false
    /// Microphone overruns recovered (sound lost while the pipeline fell behind).
    var audioOverruns = 0
}

final class Stats: Sendable {
    private let counters = Mutex(Counters())

    func update(_ change: (inout Counters) -> Void) {
        counters.withLock { change(&$0) }
    }

    var snapshot: Counters { counters.withLock { $0 } }

    /// The stats line: rates over `seconds` since `previous`, and the state now.
    static func line(_ now: Counters, since previous: Counters, seconds: Double) -> [(String, LogValue)] {
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
