// vigil-bench: measures what the appliance spends per frame, on the same synthetic frames,
// in one run: the pieces (conversion, encoding, detection, the timestamp overlay) on a static
// textured scene with sensor noise, then the whole agent (`vigil run`, built beside it)
// against x264 alone and against ffmpeg on footage with events, and the agent in real time on
// its synthetic camera (AgentBench.swift). `make bench` runs it from a release build; numbers
// are printed, never asserted.
//
//   vigil-bench [--json PATH] [--frames N] [--seconds S] [--repeats N] [--realtime-seconds S] [--sizes WxH,…]
//               [--only scale|rtsp] [--clips N,…]

import Capture
import Configuration
import Foundation
import H264
import Media
import MotionDetection
import Overlay
import POSIX
import QuickTime

struct Options {
    var jsonPath: String?
    var frames = 60
    var passes = 3
    /// Seconds of 1080p footage (at 30 fps) the whole agent, x264 alone and ffmpeg run on;
    /// smaller sizes get as many pixels (so more seconds).
    var seconds = 10.0
    /// Runs of each of the three, interleaved; the medians are reported.
    var repeats = 5
    /// Seconds the agent runs in real time at each size (its demo scene has events 5 s and 25 s in).
    var realtimeSeconds = 36.0
    /// Picture sizes to measure.
    var sizes = [(640, 480), (1280, 720), (1920, 1080)]
    /// Only the scale rows (`--only scale`), or everything.
    var onlyScale = false
    /// Only the encode and the RTSP rows (`--only rtsp`).
    var onlyRTSP = false
    /// The numbers of clips the scale rows start the agent on (ScaleBench.swift).
    var clips = [0, 10_000, 100_000]

    init(_ arguments: [String]) throws {
        var args = arguments[...]
        /// The option's value, a number in `range`; else a usage error: `option` needs `what`.
        func number<N: LosslessStringConvertible & Comparable>(
            _ option: String, in range: ClosedRange<N>, _ what: String
        ) throws -> N {
            guard let n = args.popFirst().flatMap({ N($0) }), range.contains(n) else {
                throw UsageError("\(option) needs \(what)")
            }
            return n
        }
        while let a = args.popFirst() {
            switch a {
            case "--json":
                guard let p = args.popFirst() else { throw UsageError("--json needs a file path") }
                jsonPath = p
            case "--frames": frames = try number(a, in: 10...600, "a count from 10 to 600")
            case "--seconds": seconds = try number(a, in: 2...120, "a number of seconds from 2 to 120")
            case "--repeats": repeats = try number(a, in: 1...20, "a count from 1 to 20")
            case "--realtime-seconds":
                realtimeSeconds = try number(a, in: 5...600, "a number of seconds from 5 to 600")
            case "--sizes":
                let parsed = (args.popFirst() ?? "").split(separator: ",").map {
                    $0.split(separator: "x").compactMap { Int($0) }
                }
                guard !parsed.isEmpty,
                    parsed.allSatisfy({
                        $0.count == 2 && (16...4096).contains($0[0]) && (16...4096).contains($0[1]) && $0[0] % 2 == 0
                            && $0[1] % 2 == 0
                    })
                else {
                    throw UsageError("--sizes needs sizes as in 640x480,1920x1080 (even, 16 to 4096)")
                }
                sizes = parsed.map { ($0[0], $0[1]) }
            case "--only":
                let part = args.popFirst() ?? ""
                switch part {
                case "scale": onlyScale = true
                case "rtsp": onlyRTSP = true
                default:
                    throw UsageError(
                        "--only \(part): no such part — give --only scale (the scale rows) or --only rtsp (the x264 encode and the RTSP viewers)"
                    )
                }
            case "--clips":
                let parsed = (args.popFirst() ?? "").split(separator: ",").compactMap { Int($0) }
                guard !parsed.isEmpty, parsed.allSatisfy({ (0...1_000_000).contains($0) }) else {
                    throw UsageError("--clips needs counts of clips as in 0,10000,100000 (0 to 1000000)")
                }
                clips = parsed
            case "-h", "--help":
                print(
                    """
                    usage: vigil-bench [--json PATH] [--frames N] [--seconds S] [--repeats N] [--realtime-seconds S] [--sizes WxH,…]
                                         [--only scale|rtsp] [--clips N,…]
                      at 640×480, 1280×720 and 1920×1080, 30 fps: YUYV→NV12 and 4:2:2→4:2:0 conversion, x264
                      encoding, motion detection and the timestamp overlay; `vigil run` on S seconds of footage
                      (default 10) against x264 alone and ffmpeg, by CPU time, medians of N runs (default 5);
                      and `vigil run` in real time for S seconds (default 36): peak RSS, dropped frames,
                      trigger-to-disk latency.
                      Then the scale rows, at 0, 10,000 and 100,000 clips (--clips), made in var/bench/scale
                      (beside --json's file): the agent's start, its memory, the page, /api/clips and a
                      retention sweep, times the medians of up to N (--repeats); --only scale runs those alone,
                      --only rtsp the x264 encode and the RTSP viewers' rows alone.
                      `vigil` must be built beside vigil-bench (`make bench` does it).
                    """)
                exit(0)
            default:
                throw UsageError("unknown argument \(a)")
            }
        }
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ text: String) { description = text }
}

/// The machine: CPU model and online cores.
func machine() -> [String: Any] {
    let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
    let model =
        cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") || $0.hasPrefix("Model") }
        .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" }
        ?? "unknown"
    // Other work on the machine skews the figures; the load average says how much there was.
    let load =
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").split(separator: " ").first.map(
            String.init) ?? "?"
    return [
        "cpu": model, "cores": ProcessInfo.processInfo.activeProcessorCount, "load_average_1min": load,
        "x264_build": X264Encoder.libraryBuild, "x264_version": X264Encoder.libraryVersion,
        "os": ProcessInfo.processInfo.operatingSystemVersionString,
    ]
}

/// The encoder settings `vigil run` uses when its configuration sets none: what the bench
/// measures x264 with.
func defaultEncoderSettings() throws -> Settings.Encoder {
    try Settings(values: ConfigValues.parse("", name: "defaults"), directory: "/").encoder
}

/// Seconds taken by `body`.
func time(_ body: () throws -> Void) rethrows -> Double {
    let start = Clock.monotonic.now()
    try body()
    return (Clock.monotonic.now() - start).seconds
}

/// Runs `body` over `frames` until at least `minimum` seconds and `rounds` rounds have
/// passed; returns milliseconds per frame.
func perFrame(_ frames: [VideoFrame], minimum: Double = 0.3, rounds: Int = 2, _ body: (VideoFrame) -> Void) -> Double {
    var count = 0
    var elapsed = 0.0
    var round = 0
    while elapsed < minimum || round < rounds {
        elapsed += time { for f in frames { body(f) } }
        count += frames.count
        round += 1
    }
    return elapsed * 1000 / Double(count)
}

func run() throws {
    let arguments = Array(CommandLine.arguments.dropFirst())
    if arguments.first == "--encoder-memory" {  // the child of encoderMemory(width:height:in:)
        let size = arguments.dropFirst().first?.split(separator: "x").compactMap { Int($0) } ?? []
        guard size.count == 2 else { throw UsageError("--encoder-memory needs a size as in 1920x1080") }
        return try encoderMemoryChild(width: size[0], height: size[1])
    }
    if arguments.first == "--write-footage" {  // for profiling by hand: docs/design/performance.md
        let size = arguments.dropFirst().first?.split(separator: "x").compactMap { Int($0) } ?? []
        guard arguments.count == 4, size.count == 2, let seconds = Double(arguments[2]) else {
            throw UsageError("--write-footage needs a size, seconds and a path: 640x480 10 events.y4m")
        }
        let frames = try writeY4M(eventScene(width: size[0], height: size[1], seconds: seconds), to: arguments[3])
        print("wrote \(frames) frames to \(arguments[3])")
        return
    }
    if arguments.first == "--instruction-gate" {
        guard arguments.count == 2 else { throw UsageError("--instruction-gate needs the baseline file") }
        exit(try instructionGate(baselinePath: arguments[1]))
    }
    let options = try Options(arguments)
    let info = machine()
    if options.onlyScale { return try runScale(options, machine: info) }
    let sizes = options.sizes
    let columns = sizes.map { "\($0.0)×\($0.1)" }
    var table = BenchTable(columns: columns)
    let rate = Rational(30, 1)
    let defaults = try defaultEncoderSettings()
    print(
        "vigil-bench: \(info["cpu"] ?? "?"), \(info["cores"] ?? "?") cores (load average \(info["load_average_1min"] ?? "?")), libx264 \(X264Encoder.libraryVersion) (build \(X264Encoder.libraryBuild))"
    )
    #if DEBUG
    print("warning: this is a debug build; run `make bench` for release figures")
    #endif
    print(
        "frames: synthetic static scene with noise (sigma 3), \(options.frames) distinct frames at 30 fps, encoded \(options.passes)× over"
    )
    print(
        "x264: \(defaults.x264.preset.rawValue)/\(defaults.x264.tune.map(\.rawValue).joined(separator: ",")), CRF \(Int(defaults.x264.crf)), keyframe every \(defaults.keyframeInterval) s"
    )
    print(
        "whole agent: a Y4M file of a scene with two events each 10 s, as many pixels as \(DecimalText.short(options.seconds, 3)) s of 1080p (\(DecimalText.short(options.seconds * 6.75, 3)) s at 640×480); vigil run vs x264 alone vs ffmpeg by CPU time, median of \(options.repeats)"
    )
    print(
        "real time: vigil run on its synthetic camera (demo scene, events 5 s and 25 s in) for \(DecimalText.short(options.realtimeSeconds, 3)) s, pre_roll 10 s\n"
    )
    // The board's hardware encoder, when there is one that Vigil would record with: its CPU
    // per frame beside x264's, on the same frames.
    let hardware = M2MSession.devices(among: DeviceProbe.cameraPaths()).first { $0.encodesH264 && $0.canPlaceKeyframes }
    print(
        "hardware encoder (V4L2 memory-to-memory H.264): "
            + (hardware.map { "\($0.path), \($0.name): CPU per frame beside x264's, on the same frames" }
                ?? "none found — its rows are left out\n"))
    var pipeline: [[String: Any]] = []

    for ((width, height), column) in zip(sizes, columns) {
        let scene = SyntheticScene(
            width: width, height: height, frameRate: rate, seed: 2024, noiseSigma: 3, schedule: .empty)
        let source = try SyntheticSource(scene: scene)
        var frames: [VideoFrame] = []
        let generation = try time {
            for _ in 0..<options.frames { if let f = try source.nextFrame() { frames.append(f) } }
        }
        table.record(
            "synthetic scene render", unit: "ms/frame", column: column, value: generation * 1000 / Double(frames.count))

        // Conversions, on the same pictures: eight frames cycled (together larger than the
        // caches, as camera buffers filled by DMA are), and one frame over and over (the
        // loop's own speed, its source in cache).
        let sample = Array(frames.prefix(8))
        let packed = try sample.map { try $0.repacked(as: .yuyv) }
        let nv12 = try VideoFormat(width: width, height: height, pixelFormat: .nv12)
        let nv12Buffer = FrameBuffer(capacity: nv12.bufferSize)
        table.record(
            "YUYV → NV12 repack, from memory", unit: "ms/frame", column: column,
            value: perFrame(packed) { _ = PixelConversion.convert($0, into: nv12Buffer, format: nv12) })
        table.record(
            "YUYV → NV12 repack, in cache", unit: "ms/frame", column: column,
            value: perFrame(Array(repeating: packed[0], count: 8)) {
                _ = PixelConversion.convert($0, into: nv12Buffer, format: nv12)
            })
        let planar422 = try sample.map { try $0.repacked(as: .i422) }
        let i420 = try VideoFormat(width: width, height: height, pixelFormat: .i420)
        let i420Buffer = FrameBuffer(capacity: i420.bufferSize)
        table.record(
            "I422 → I420 chroma, from memory", unit: "ms/frame", column: column,
            value: perFrame(planar422) { f in
                PixelConversion.halveChromaRows(f.plane(1), into: i420Buffer.mutablePlane(i420.planes[1]))
                PixelConversion.halveChromaRows(f.plane(2), into: i420Buffer.mutablePlane(i420.planes[2]))
            })

        var encodeOneThread = 0.0
        var encodedSamples: [EncodedSample] = []
        var parameterSets: (sps: [UInt8], pps: [UInt8]) = ([], [])
        for (label, threads) in [("1 thread", 1), ("default threads", 0)] {
            var settings = defaults.x264
            settings.threads = threads
            let encoder = try X264Encoder(format: source.format, settings: settings)
            var keyframes = KeyframeSchedule(interval: .init(seconds: defaults.keyframeInterval))
            var bytes = 0
            var encoded = 0
            let total = options.frames * options.passes
            let elapsed = try time {
                for n in 0..<total {
                    let f = frames[n % frames.count]
                    let frame = VideoFrame(
                        format: f.format, buffer: f.buffer, timestamp: scene.timestamp(ofFrame: Int64(n)),
                        sequence: UInt64(n))
                    for s in try encoder.encode(frame, keyframe: keyframes.keyframeDue(at: frame.timestamp)) {
                        bytes += s.data.count
                        encoded += 1
                        if threads == 1 { encodedSamples.append(s) }
                    }
                }
                for s in try encoder.flush() {
                    bytes += s.data.count
                    encoded += 1
                    if threads == 1 { encodedSamples.append(s) }
                }
            }
            precondition(encoded == total, "the encoder returned \(encoded) of \(total) frames")
            if threads == 1 { parameterSets = (encoder.sequenceParameterSet, encoder.pictureParameterSet) }
            table.record(
                "x264 encode, \(label)", unit: "ms/frame", column: column, value: elapsed * 1000 / Double(total))
            if threads == 1 { encodeOneThread = elapsed * 1000 / Double(total) }
            table.record("x264 encode, \(label)", unit: "frames/s", column: column, value: Double(total) / elapsed)
            if threads == 1 {
                let seconds = Double(total) * Double(rate.denominator) / Double(rate.numerator)
                table.record("encoded stream", unit: "KB/s", column: column, value: Double(bytes) / seconds / 1000)
            }
        }

        // Ten RTSP viewers of the encoded stream, over TCP and UDP, beside the floor of sending
        // the same bytes (RTSPBench.swift).
        for transport in ["tcp", "udp", "floor"] {
            try measureRTSPViewers(
                samples: encodedSamples,
                video: VideoTrackFormat(
                    width: width, height: height, sequenceParameterSet: parameterSets.sps,
                    pictureParameterSet: parameterSets.pps),
                encodePerFrame: encodeOneThread, column: column, seconds: 10, transport: transport, table: &table)
        }
        if options.onlyRTSP { continue }

        if let hardware, hardware.takes(width: width, height: height) {
            try measureHardware(
                hardware, frames: frames, scene: scene, defaults: defaults, column: column, table: &table)
        }

        // Motion detection on the same frames' luma, with the default settings but the dynamic
        // background on (the agent's per-frame cost beside the encoder), then without it.
        // Timestamps advance so the background adapts.
        var detector = MotionDetector(settings: try motionSettings(dynamicBackground: true))
        var n: Int64 = 0
        let detect = perFrame(frames) { f in
            _ = detector.process(f.luma, at: scene.timestamp(ofFrame: n))
            n += 1
        }
        table.record(
            "motion detection with dynamic background, static scene", unit: "ms/frame", column: column, value: detect)
        table.record(
            "motion detection with dynamic background / x264, 1 thread", unit: "%", column: column,
            value: 100 * detect / encodeOneThread)
        var plain = MotionDetector(settings: try motionSettings(dynamicBackground: false))
        n = 0
        let detectPlain = perFrame(frames) { f in
            _ = plain.process(f.luma, at: scene.timestamp(ofFrame: n))
            n += 1
        }
        table.record(
            "motion detection without dynamic background, static scene", unit: "ms/frame", column: column,
            value: detectPlain)

        // The timestamp overlay on the same frames (drawn into them: measured last), beside the
        // encode of the same frames above.
        try measureOverlay(frames, encodePerFrame: encodeOneThread, column: column, table: &table)
        frames = []

        // Writing the encoded stream as a clip: what the fsync of each fragment costs.
        try measureWriting(
            samples: encodedSamples,
            video: VideoTrackFormat(
                width: width, height: height, sequenceParameterSet: parameterSets.sps,
                pictureParameterSet: parameterSets.pps),
            column: column,
            directory: options.jsonPath.map { ($0 as NSString).deletingLastPathComponent } ?? "var/bench",
            table: &table)
        try measureLiveView(
            samples: encodedSamples,
            video: VideoTrackFormat(
                width: width, height: height, sequenceParameterSet: parameterSets.sps,
                pictureParameterSet: parameterSets.pps),
            encodePerFrame: encodeOneThread, column: column, table: &table)
        encodedSamples = []

        // The whole agent, on footage with events; then in real time.
        print("measuring vigil run at \(column)…")
        pipeline.append(try measureAgent(width: width, height: height, column: column, options: options, table: &table))
    }

    print(table.render())
    if options.onlyRTSP { return }
    let (scaleTable, scale) = try measureScale(options)
    print(scaleTable.render())

    if let path = options.jsonPath {
        var results: [[String: Any]] = []
        for row in table.rows {
            for column in table.columns {
                if let v = row.values[column] {
                    results.append(["measurement": row.measurement, "unit": row.unit, "size": column, "value": v])
                }
            }
        }
        let document: [String: Any] = [
            "machine": info,
            "date": ISO8601DateFormatter().string(from: Date()),
            "frames": [
                "source": "synthetic static scene, noise sigma 3", "distinct": options.frames, "passes": options.passes,
                "rate": "30",
            ],
            "encoder": [
                "preset": defaults.x264.preset.rawValue,
                "tune": defaults.x264.tune.map(\.rawValue).joined(separator: ","),
                "crf": defaults.x264.crf, "keyframe_interval": defaults.keyframeInterval,
            ],
            "results": results,
            "pipeline": pipeline,
            "hardware_encoder": hardware.map { "\($0.path) \($0.name)" } ?? "none found",
            "scale": scale,
        ]
        try writeJSON(document, to: path)
    }
}

/// Writes `document` as JSON to `path`, its directory made if missing.
func writeJSON(_ document: [String: Any], to path: String) throws {
    let data = try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys])
    let url = URL(fileURLWithPath: path)
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try data.write(to: url)
    print("\nwrote \(path)")
}

/// The scale rows (`--only scale`): their table, and the JSON with the machine and date.
func runScale(_ options: Options, machine info: [String: Any]) throws {
    print(
        "vigil-bench: \(info["cpu"] ?? "?"), \(info["cores"] ?? "?") cores (load average \(info["load_average_1min"] ?? "?"))"
    )
    let (table, scale) = try measureScale(options)
    print(table.render())
    if let path = options.jsonPath {
        try writeJSON(
            ["machine": info, "date": ISO8601DateFormatter().string(from: Date()), "scale": scale], to: path)
    }
}

/// The scale rows at `options.clips`, made beside the JSON file (var/bench by default).
func measureScale(_ options: Options) throws -> (BenchTable, [String: Any]) {
    print(
        "\nscale: vigil run on its synthetic camera (640×480, web on) on storage directories of "
            + options.clips.map(grouped).joined(separator: ", ")
            + " clips (one clip hard-linked, 351 a day); times are medians of up to \(options.repeats) (fewer after a minute)\n"
    )
    return try measureScale(
        counts: options.clips, repeats: options.repeats,
        directory: options.jsonPath.map { ($0 as NSString).deletingLastPathComponent }.flatMap { $0.isEmpty ? nil : $0 }
            ?? "var/bench")
}

/// The timestamp overlay as the agent would draw it (the default font at scale 2, the date,
/// the time and the camera's name): microseconds per frame with the text rasterised once (each
/// frame of a second but the first), with a new text at every frame (rasterising each time),
/// and the first as a share of the x264 encode of the same frames.
func measureOverlay(
    _ frames: [VideoFrame], encodePerFrame: Double, column: String, table: inout BenchTable
) throws {
    let font = try BitmapFont.load(path: BitmapFont.defaultPath)
    let overlay = try TextOverlay(font: font, position: .topLeft, scale: 2)
    let pattern = OverlayText(pattern: "%Y-%m-%d %H:%M:%S {camera}", camera: try Settings.defaults().camera.name)
    let now = Date()
    let text = pattern.text(at: now)
    let texts = [pattern.text(at: now + 1), pattern.text(at: now + 2)]
    let draw = perFrame(frames) { overlay.draw(text, into: $0) }
    var n = 0
    let redraw = perFrame(frames) { f in
        overlay.draw(texts[n % 2], into: f)
        n += 1
    }
    let label = "timestamp overlay (\(text.unicodeScalars.count) characters, scale 2)"
    table.record("\(label), cached", unit: "µs/frame", column: column, value: draw * 1000)
    table.record("\(label), new text", unit: "µs/frame", column: column, value: redraw * 1000)
    table.record(
        "timestamp overlay, cached / x264 encode, 1 thread", unit: "%", column: column,
        value: 100 * draw / encodePerFrame)
}

/// The CPU time (user and system) this process spends in `body`, in seconds: what a hardware
/// encoder saves is CPU, not wall time (the device works while the process waits).
func cpuTime(_ body: () throws -> Void) rethrows -> Double {
    let (user, system) = try cpuTimes(body)
    return user + system
}

/// The same, apart: the process's own (user) seconds and the kernel's on its behalf (system).
func cpuTimes(_ body: () throws -> Void) rethrows -> (user: Double, system: Double) {
    func now() -> (Double, Double) {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return (usage.ru_utime.seconds, usage.ru_stime.seconds)
    }
    let start = now()
    try body()
    let end = now()
    return (end.0 - start.0, end.1 - start.1)
}

/// The hardware encoder and x264 (one thread) on the same frames, keyframes as the agent
/// places them: CPU milliseconds per frame each, and their ratio.
func measureHardware(
    _ device: M2MListing, frames: [VideoFrame], scene: SyntheticScene, defaults: Settings.Encoder, column: String,
    table: inout BenchTable
) throws {
    var x264Settings = defaults.x264
    x264Settings.threads = 1
    let format = frames[0].format
    var cpu: [String: Double] = [:]
    let encoders: [(String, () throws -> any VideoEncoder)] = [
        ("x264", { try X264Encoder(format: format, settings: x264Settings) }),
        ("hardware", { try V4L2Encoder(device: device.path, format: format, settings: defaults.hardware) }),
    ]
    for (name, make) in encoders {
        let encoder = try make()
        var keyframes = KeyframeSchedule(interval: .init(seconds: defaults.keyframeInterval))
        var encoded = 0
        cpu[name] = try cpuTime {
            for (n, f) in frames.enumerated() {
                let frame = VideoFrame(
                    format: f.format, buffer: f.buffer, timestamp: scene.timestamp(ofFrame: Int64(n)),
                    sequence: UInt64(n))
                encoded += try encoder.encode(frame, keyframe: keyframes.keyframeDue(at: frame.timestamp)).count
            }
            encoded += try encoder.flush().count
        }
        precondition(encoded == frames.count, "\(name) returned \(encoded) of \(frames.count) frames")
    }
    let perFrame = { (name: String) in (cpu[name] ?? 0) * 1000 / Double(frames.count) }
    table.record("hardware encoder CPU", unit: "ms/frame", column: column, value: perFrame("hardware"))
    table.record("x264 encode CPU, 1 thread", unit: "ms/frame", column: column, value: perFrame("x264"))
    table.record(
        "hardware encoder CPU / x264 CPU", unit: "%", column: column,
        value: 100 * perFrame("hardware") / max(1e-9, perFrame("x264")))
}

do {
    try run()
} catch let error as UsageError {
    FileHandle.standardError.write("vigil-bench: \(error)\n".data(using: .utf8) ?? Data())
    exit(64)
} catch {
    FileHandle.standardError.write("vigil-bench: \(error)\n".data(using: .utf8) ?? Data())
    exit(1)
}
