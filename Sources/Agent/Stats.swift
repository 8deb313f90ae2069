import Logging
import Synchronization

/// Counters the pipeline threads update and the stats line reports: totals since start, and
/// the state now (`peakScore`: since the last stats line). The stats line shows both the
/// change since the previous line and the totals (`StatsReport.figures`).
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
    /// The highest score since the last stats line (`Stats.closeInterval` starts it again).
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

    /// The counters for a stats line, and the interval's peak score started again.
    func closeInterval() -> Counters {
        counters.withLock { counters in
            defer { counters.peakScore = 0 }
            return counters
        }
    }

    /// The stats line: `StatsReport.figures`, as the log writes them.
    static func line(_ report: StatsReport) -> [(String, LogValue)] { logged(report.figures) }

    /// `figures` as the log writes them.
    static func logged(_ figures: [StatsFigure]) -> [(String, LogValue)] {
        figures.map { figure in
            switch figure.value {
            case .int(let value): (figure.key, .int(value))
            case .number(let value, let places): (figure.key, .fixed(value, places))
            case .bool(let value): (figure.key, .bool(value))
            }
        }
    }
}

/// One figure of the stats line, and of MQTT's `stats` (the same keys, the same meaning).
///
/// The rule for its name: a key ending in `_total` counts since the agent started; any other
/// counts over the line's interval (`seconds`), or says the state now (`score`, `ring_s`,
/// `recording`, `disk_free_mb`). docs/reference/events.md lists them.
public struct StatsFigure: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Over the interval since the previous line (a rate, a count, an average).
        case interval
        /// Since the agent started.
        case total
        /// As it is when the line is written.
        case now
    }
    public enum Value: Sendable, Equatable {
        case int(Int)
        /// A number with `places` decimals.
        case number(Double, places: Int)
        case bool(Bool)
    }
    public var key: String
    public var kind: Kind
    public var value: Value
}

extension StatsReport {
    /// The figures of the report, in the stats line's order.
    public var figures: [StatsFigure] {
        let frames = now.framesIn - previous.framesIn
        let encoded = now.framesEncoded - previous.framesEncoded
        let encodeMs = encoded > 0 ? (now.encodeSeconds - previous.encodeSeconds) * 1000 / Double(encoded) : 0
        let detectMs = encoded > 0 ? (now.detectSeconds - previous.detectSeconds) * 1000 / Double(encoded) : 0
        func interval(_ key: String, _ value: StatsFigure.Value) -> StatsFigure {
            StatsFigure(key: key, kind: .interval, value: value)
        }
        func state(_ key: String, _ value: StatsFigure.Value) -> StatsFigure {
            StatsFigure(key: key, kind: .now, value: value)
        }
        return [
            interval("seconds", .number(seconds, places: 1)),
            interval("fps_in", .number(seconds > 0 ? Double(frames) / seconds : 0, places: 1)),
            interval("fps_out", .number(seconds > 0 ? Double(encoded) / seconds : 0, places: 1)),
            interval("lost_at_source", .int(now.framesLostAtSource - previous.framesLostAtSource)),
            interval("dropped_at_capture", .int(now.framesDroppedAtCapture - previous.framesDroppedAtCapture)),
            interval("dropped_at_writer", .int(now.samplesDroppedAtWriter - previous.samplesDroppedAtWriter)),
            interval("audio_overruns", .int(now.audioOverruns - previous.audioOverruns)),
            interval("encode_ms", .number(encodeMs, places: 2)),
            interval("detect_ms", .number(detectMs, places: 3)),
            interval("peak_score", .number(now.peakScore, places: 4)),
            state("score", .number(now.lastScore, places: 4)),
            state("ring_s", .number(now.ringSeconds, places: 1)),
            state("ring_bytes", .int(now.ringBytes)),
            state("recording", .bool(now.recording)),
            state("disk_free_mb", .int(Int(now.diskFreeBytes >> 20))),
        ] + (uploadWaiting.map { [state("upload_waiting", .int($0))] } ?? []) + now.totals
    }
}

extension Counters {
    /// The figures that count since the agent started (`_total`): the end of each stats line,
    /// and the whole of the "vigil stopped" line.
    public var totals: [StatsFigure] {
        func total(_ key: String, _ value: Int) -> StatsFigure {
            StatsFigure(key: key + "_total", kind: .total, value: .int(value))
        }
        return [
            total("frames", framesIn),
            total("lost_at_source", framesLostAtSource),
            total("dropped_at_capture", framesDroppedAtCapture),
            total("dropped_at_writer", samplesDroppedAtWriter),
            total("audio_overruns", audioOverruns),
            total("clips", clipsWritten),
            total("clip_errors", clipErrors),
        ]
    }
}
