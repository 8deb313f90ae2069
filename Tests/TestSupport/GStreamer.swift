import Foundation

/// GStreamer, the third independent reader of every movie a test writes (after ffprobe and
/// ffmpeg, which share libavformat's demuxer; GStreamer's `qtdemux` is a demuxer of its own).
///
/// The movie is decoded in full by
///
///     gst-launch-1.0 -v filesrc location=PATH ! qtdemux ! h264parse ! avdec_h264 ! fakesink silent=false
///
/// (the video track only: `qtdemux` links its first pad that fits, a sound track's pad stays
/// unlinked and is skipped). How the result is read:
/// - **Frames.** `fakesink silent=false` updates its `last-message` property for every buffer it
///   receives and `-v` prints each change on stdout: one `last-message = chain … pts: …` line per
///   decoded frame. They are counted and their presentation times read.
/// - **Warnings and errors**, from two places:
///   1. the debug log, on stderr: `GST_DEBUG` is `*:1` (an error from any element, including
///      `filesrc` and the core) and level 2 (warnings too) for the categories of the elements
///      that read the movie — `qtdemux`, `h264parse` and its base class `baseparse`, `libav`
///      (`avdec_h264`, and libavcodec's own log, which gst-libav forwards to that category) and
///      `videodecoder` (avdec_h264's base class). Every line printed there is a problem
///      unless `tolerated` says otherwise. Warnings of the other categories at level 2 are
///      about the pipeline, not the file (`basesrc` warns "pad not activated yet" on every
///      run, when `qtdemux` takes over `filesrc` in pull mode).
///   2. gst-launch's own report of the warning and error messages elements post on the bus:
///      stdout lines beginning `WARNING:` (with `-q` gst-launch would not print these, so it
///      runs without it) and `ERROR:`, with the `Additional debug info:` after them; and any
///      exit status but 0.
public enum GStreamer {
    public static let tool = "gst-launch-1.0"

    /// What a full decode showed.
    public struct Decode: Sendable {
        /// The presentation time, in seconds, of each frame fakesink received, in order (nil
        /// when a buffer had none).
        public var frames: [Double?]
        /// What GStreamer warned about or failed at (empty for a clean movie): debug-log lines
        /// without their time/pid/thread prefix, gst-launch's WARNING/ERROR reports, the exit
        /// status when not 0.
        public var problems: [String]
        /// Warnings seen and let pass as known reader artefacts (see `tolerated`).
        public var tolerated: [String]
    }

    /// The debug categories and levels the decode runs with (see the type's documentation).
    public static let debugLevels = "*:1,qtdemux:2,h264parse:2,baseparse:2,libav:2,videodecoder:2"
    /// The same for the sound track: the Opus parser and decoder and their base classes.
    public static let soundDebugLevels = "*:1,qtdemux:2,opusparse:2,baseparse:2,opusdec:2,audiodecoder:2"

    /// Which track a decode reads.
    public enum Track: Sendable {
        /// H.264 (`h264parse ! avdec_h264`).
        case video
        /// Opus, the live stream's sound (`opusparse ! opusdec`): `frames` are its packets.
        case opusSound
    }

    /// Decodes the video track (or `track`) of `path` in full (a file, or an `http://` URL
    /// read with `souphttpsrc`).
    public static func decode(_ path: String, track: Track = .video) throws -> Decode {
        var environment = ProcessInfo.processInfo.environment
        environment["GST_DEBUG"] = track == .video ? debugLevels : soundDebugLevels
        environment["GST_DEBUG_NO_COLOR"] = "1"
        environment["GST_DEBUG_FILE"] = nil
        let r = try runTool(
            tool,
            [
                "-v", path.hasPrefix("http://") ? "souphttpsrc" : "filesrc", "location=\(path)", "!", "qtdemux", "!",
            ] + (track == .video ? ["h264parse", "!", "avdec_h264", "!"] : ["opusparse", "!", "opusdec", "!"]) + [
                "fakesink", "silent=false",
            ], environment: environment)
        let unfragmented = isFinishedMovie(path)
        var decode = Decode(frames: [], problems: [], tolerated: [])
        // After a WARNING:/ERROR: report, gst-launch may print "Additional debug info:" and
        // one line of it: both are added to the report.
        var inReport = false, debugInfoNext = false
        for line in r.stdout.split(separator: "\n").map(String.init) {
            if line.contains("last-message = chain") {
                decode.frames.append(presentationTime(line))
                inReport = false
            } else if line.hasPrefix("WARNING:") || line.hasPrefix("ERROR:") {
                decode.problems.append(line)
                inReport = true
            } else if inReport && (debugInfoNext || line.hasPrefix("Additional debug info:")) {
                decode.problems[decode.problems.count - 1] += " | " + line
                inReport = !debugInfoNext
                debugInfoNext = !debugInfoNext
            } else {
                inReport = false
            }
        }
        for raw in r.stderr.split(separator: "\n").map(String.init) {
            let line = withoutLogPrefix(raw)
            if line.isEmpty { continue }
            if let reason = tolerated(line, unfragmented: unfragmented) {
                decode.tolerated.append(line + " (" + reason + ")")
            } else {
                decode.problems.append(line)
            }
        }
        if r.status != 0 { decode.problems.append("\(tool) exited \(r.status)") }
        return decode
    }

    /// The warnings let pass, each a known artefact of the reader rather than a fault of the
    /// movie; nil for anything else. Each is matched on its whole text.
    static func tolerated(_ line: String, unfragmented: Bool) -> String? {
        // qtdemux 1.22 (qtdemux.c, qtdemux_parse_trak) looks up every track's fragment
        // defaults — the `trex` box under `moov/mvex` — as soon as it parses the track, in any
        // movie, and warns when there is none. A finished movie (`isFinishedMovie`: its header
        // has no `mvex`) is not fragmented and has no `trex` to find: the defaults are only ever
        // used for the samples of a `moof`, and it has none (a finished clip's fragments are
        // hidden boxes qtdemux skips). So the warning is harmless exactly there; in a movie still
        // fragmented it would mean a missing `trex` and stays a problem.
        if unfragmented, line.hasPrefix("WARN qtdemux qtdemux.c:"),
            line.contains(":qtdemux_parse_trex:"),
            let tail = line.range(of: "> failed to find fragment defaults for stream "),
            Int(line[tail.upperBound...]) != nil
        {
            return "no fragments: nothing uses the defaults"
        }
        // qtdemux_types.c's table of box types (which boxes are containers to descend into,
        // and how to dump each in the log) has no entry for the `sowt` sound sample entry —
        // little-endian 16-bit PCM, the QuickTime codec our sound tracks use — and qtdemux
        // warns while building its box tree. The entry itself is read by the code that maps
        // sample entries to caps (audio/x-raw, S16LE), which knows `sowt`; and a `sowt` entry
        // has no child boxes to descend into. The sound track is recognised all the same.
        // The `Opus` sample entry of the live stream is missing from the table too (a movie
        // FFmpeg makes with Opus gets the same warning): the code that maps it to caps
        // (audio/x-opus) finds it and reads its `dOps` itself.
        if line.hasPrefix("WARN qtdemux qtdemux_types.c:"),
            line.hasSuffix(":qtdemux_type_get: unknown QuickTime node type sowt")
                || line.hasSuffix(":qtdemux_type_get: unknown QuickTime node type Opus")
        {
            return "a box type missing from qtdemux's table, not from the movie"
        }
        return nil
    }

    /// `0:00:00.122 32050 0x5623d26cf400 WARN    qtdemux qtdemux.c:…` → `WARN qtdemux qtdemux.c:…`;
    /// a line not in the debug log's format is returned whole.
    static func withoutLogPrefix(_ line: String) -> String {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count > 4, fields[0].contains(":"), fields[0].contains("."), Int(fields[1]) != nil,
            fields[2].hasPrefix("0x")
        else { return line.trimmingCharacters(in: .whitespaces) }
        return fields.dropFirst(3).joined(separator: " ")
    }

    /// `pts: 0:00:01.240000000` of a fakesink chain line, in seconds.
    static func presentationTime(_ line: String) -> Double? {
        guard let start = line.range(of: "pts: ") else { return nil }
        let text = line[start.upperBound...].prefix { $0 != "," && $0 != " " }
        let parts = text.split(separator: ":")
        guard parts.count == 3, let h = Double(parts[0]), let m = Double(parts[1]), let s = Double(parts[2]) else {
            return nil
        }
        return h * 3600 + m * 60 + s
    }
}
