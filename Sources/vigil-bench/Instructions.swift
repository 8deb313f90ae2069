// Instructions per frame: `vigil run` on footage with events, under valgrind's callgrind, which
// counts every instruction every thread executes. The count is the same from run to run (two
// runs differ by a few thousand in a billion), where CPU time here moves by ±15 %: the figure a
// gate can hold. Two runs, on the first `short` and the first `long` seconds of the same scene,
// and their difference divided by the frames between: what each further frame costs, without
// the start-up (the dynamic linker, the configuration, opening the encoder).

import Foundation

/// What each part of `vigil run` executes per frame, in instructions.
struct InstructionCounts {
    var whole = 0.0
    /// libx264 and what it calls (its copies through libc's memcpy, its threads).
    var x264 = 0.0
    /// The capture thread: reading the file, handing frames on.
    var capture = 0.0
    var detection = 0.0
    /// The snapshot pictures the pipeline keeps (the peak frame, scaled down).
    var pictures = 0.0
    var overlay = 0.0
    /// The pipeline thread's own work: the ring, the recorder's decisions, events, hand-offs.
    var pipeline = 0.0
    /// The writer thread: muxing, checksums, journal, sinks, JPEG snapshots.
    var writer = 0.0
    var checksums = 0.0
    var jpeg = 0.0
    /// Everything else: the other threads (stats, housekeeping, sinks), start-up that grows.
    var other = 0.0

    var beyondX264: Double { whole - x264 }

    /// The parts of one profile, in instructions (not yet per frame).
    init(_ p: CallgrindProfile) {
        whole = Double(p.total)
        x264 = Double(p.cost(ofObject: "libx264"))
        capture = Double(p.cost(ofFunctions: ["$s5AgentAAC7capture_4into"]))
        detection = Double(p.cost(ofFunctions: ["$s15MotionDetection0A8DetectorV7process_2at"]))
        pictures = Double(p.cost(ofFunctions: ["$s5Agent8PipelineC12takePictures"]))
        overlay = Double(p.cost { $0.name.hasPrefix("$s7Overlay") })
        // The encoder's calls on the pipeline thread, from Vigil's own code (its threads are
        // started from libc's).
        let x264Called = Double(
            p.callers.filter { $0.key.object.contains("libx264") }.flatMap { $0.value }
                .filter { $0.key.name.hasPrefix("$s4H264") }.reduce(0) { $0 + $1.value })
        pipeline =
            Double(p.cost(ofFunctions: ["$s5Agent8PipelineC3run_7control"])) - x264Called - detection - pictures
            - overlay
        writer = Double(p.cost(ofFunctions: ["$s5Agent10ClipWriterC3run"]))
        checksums = Double(p.cost(ofFunctions: ["$s5Media5CRC32V6update"]))
        jpeg = Double(p.cost(ofFunctions: ["$s5Agent10ClipWriterC13writeSnapshot"]))
        other = whole - x264 - capture - detection - pictures - overlay - pipeline - writer
    }

    private init() {}

    /// Every figure, with its row in the bench's table.
    static var rows: [(label: String, field: WritableKeyPath<InstructionCounts, Double>)] {
        [
            ("instructions: vigil run, whole pipeline", \.whole),
            ("instructions: x264 (libx264 and what it calls)", \.x264),
            ("  capture thread (reading the file, hand-off)", \.capture), ("  motion detection", \.detection),
            ("  snapshot pictures kept (peak frame, scaled)", \.pictures), ("  timestamp overlay", \.overlay),
            ("  pipeline thread's own (ring, recorder, events)", \.pipeline),
            ("  writer thread (muxing, journal, sinks, JPEG)", \.writer),
            ("    of which fragment checksums (CRC-32)", \.checksums), ("    of which JPEG snapshots", \.jpeg),
            ("  other threads and the rest", \.other),
        ]
    }

    /// (long − short) / frames: each figure per frame.
    static func perFrame(short: InstructionCounts, long: InstructionCounts, frames: Int) -> InstructionCounts {
        var r = InstructionCounts()
        for (_, f) in rows { r[keyPath: f] = (long[keyPath: f] - short[keyPath: f]) / Double(frames) }
        return r
    }
}

/// Instructions per frame of ffmpeg's libx264 into a .mov (the arguments `ffmpegOnFile`
/// times): its whole process and libx264's share.
struct PeerInstructions {
    var whole: Double
    var x264: Double
}

/// Runs `vigil run` under callgrind on the first `short` and `long` seconds of the event scene
/// at `width`×`height` — and, given `ffmpeg`, ffmpeg on the same two files — and gives the
/// instructions per frame between them.
func countInstructions(
    vigil: String, ffmpeg: String? = nil, width: Int, height: Int, short: Double = 3, long: Double = 8,
    in dir: String
) throws -> (vigil: InstructionCounts, ffmpeg: PeerInstructions?) {
    var commands: [ProfiledCommand] = [
        { footage, label in
            let storage = dir + "/clips-\(label)"
            try? FileManager.default.removeItem(atPath: storage)
            let config = dir + "/\(label).conf"
            try writeFileSourceConfig(config, footage: footage, storage: storage)
            return (
                vigil, ["run", "--config", config],
                { r in
                    try? FileManager.default.removeItem(atPath: storage)
                    guard r.output.contains("msg=\"clip saved\"") else {
                        throw AgentRunError(description: "vigil run under callgrind saved no clip:\n\(r.output)")
                    }
                }
            )
        }
    ]
    if let ffmpeg {
        commands.append { footage, label in
            let output = dir + "/\(label).mov"
            return (
                ffmpeg, ffmpegArguments(footage: footage, output: output),
                { _ in try? FileManager.default.removeItem(atPath: output) }
            )
        }
    }
    let (profiles, frames) = try profilePairs(
        width: width, height: height, short: short, long: long, in: dir, commands: commands)
    let counts = InstructionCounts.perFrame(
        short: InstructionCounts(profiles[0].short), long: InstructionCounts(profiles[0].long), frames: frames)
    let peer = profiles.count > 1 ? profiles[1] : nil
    return (
        counts,
        peer.map { p in
            PeerInstructions(
                whole: Double(p.long.total - p.short.total) / Double(frames),
                x264: Double(p.long.cost(ofObject: "libx264") - p.short.cost(ofObject: "libx264")) / Double(frames))
        }
    )
}

/// A program to profile on a footage file (its label tells its files apart): the program, its
/// arguments, and a check of its run.
typealias ProfiledCommand = (_ footage: String, _ label: String) throws -> (
    program: String, arguments: [String], check: (MeasuredProcess.Result) throws -> Void
)

/// Each command under callgrind on the first `short` and the first `long` seconds of the event
/// scene (each footage file written once for all of them): their two profiles, in order, and
/// the frames between.
func profilePairs(
    width: Int, height: Int, short: Double, long: Double, in dir: String, commands: [ProfiledCommand]
) throws -> (profiles: [(short: CallgrindProfile, long: CallgrindProfile)], frames: Int) {
    guard let valgrind = which("valgrind") else {
        throw UsageError("valgrind is not installed: apt-get install valgrind (it counts the instructions)")
    }
    var runs: [[CallgrindProfile]] = []
    var frames: [Int] = []
    for seconds in [short, long] {
        let scene = "instructions-\(width)x\(height)-\(Int(seconds))s"
        let footage = dir + "/\(scene).y4m"
        frames.append(try writeY4M(eventScene(width: width, height: height, seconds: seconds), to: footage))
        defer { try? FileManager.default.removeItem(atPath: footage) }
        var profiles: [CallgrindProfile] = []
        for (n, command) in commands.enumerated() {
            let label = "\(scene)-\(n)"
            let (program, arguments, check) = try command(footage, label)
            let name = (program as NSString).lastPathComponent
            let out = dir + "/\(label).callgrind"
            defer { try? FileManager.default.removeItem(atPath: out) }
            let r = try MeasuredProcess.run(
                valgrind, ["--tool=callgrind", "--callgrind-out-file=\(out)", program] + arguments,
                outputPath: dir + "/\(label).log")
            guard !r.signalled, r.status == 0 else {
                throw AgentRunError(description: "\(name) under callgrind exited \(r.status):\n\(r.output)")
            }
            try check(r)
            profiles.append(try CallgrindProfile(path: out))
        }
        runs.append(profiles)
    }
    return (commands.indices.map { (runs[0][$0], runs[1][$0]) }, frames[1] - frames[0])
}

/// Records the counts as rows of the bench's table (the count beyond x264 after x264's).
func record(_ c: InstructionCounts, column: String, table: inout BenchTable) {
    let unit = "k instr/frame"
    for (n, (label, field)) in InstructionCounts.rows.enumerated() {
        if n == 2 {
            table.record(
                "instructions: beyond x264 (the gate holds this)", unit: unit, column: column,
                value: c.beyondX264 / 1000)
        }
        table.record(label, unit: unit, column: column, value: c[keyPath: field] / 1000)
    }
    table.record("instructions beyond x264 / x264", unit: "%", column: column, value: 100 * c.beyondX264 / c.x264)
}

/// The gate (`make test-instructions`, run by CI): the instructions per frame beyond x264 at
/// 640×480, against the number kept in `baselinePath` for this machine's architecture; fails
/// when they grew by more than `tolerance` (10 %). Changing the number is a commit of its own
/// reasons: a line added to the file, saying why.
func instructionGate(baselinePath: String, tolerance: Double = 0.10) throws -> Int32 {
    let vigil = siblingExecutable("vigil")
    guard FileManager.default.isExecutableFile(atPath: vigil) else {
        throw UsageError("\(vigil) is not built; run `make test-instructions` (it builds vigil and vigil-bench)")
    }
    let architecture = machineArchitecture()
    let (width, height) = (640, 480)
    let size = "\(width)x\(height)"
    guard let text = try? String(contentsOfFile: baselinePath, encoding: .utf8) else {
        throw UsageError("cannot read the instruction baseline \(baselinePath)")
    }
    // Lines of `architecture size instructions reason…`; the last line for ours holds.
    let kept = text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { $0.split(separator: " ") }
        .last { $0.count >= 3 && $0[0] == architecture && $0[1] == size }
    let dir = NSTemporaryDirectory() + "vigil-instructions-\(getpid())"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let c = try countInstructions(vigil: vigil, width: width, height: height, in: dir).vigil
    var table = BenchTable(columns: [size])
    record(c, column: size, table: &table)
    print(table.render())
    let measured = c.beyondX264.rounded()
    guard let kept, let baseline = Double(kept[2]) else {
        print(
            "no baseline for \(architecture) \(size) in \(baselinePath): add the line\n\(architecture) \(size) \(Int(measured)) <why>"
        )
        return 1
    }
    let change = measured / baseline - 1
    let said =
        "instructions per frame beyond x264 at \(size): \(Int(measured)), kept \(Int(baseline)) (\(String(format: "%+.1f", 100 * change)) %)"
    if change > tolerance {
        print(
            "FAIL: \(said), more than \(Int(tolerance * 100)) % over the number kept in \(baselinePath). Find what grew (the rows above; `valgrind --tool=callgrind` and callgrind_annotate name the functions), or, when the cost is meant, add a line with the new number and the reason."
        )
        return 1
    }
    if change < -tolerance {
        print(
            "ok: \(said): cheaper by more than \(Int(tolerance * 100)) % — add a line with the new number to hold the gain"
        )
    } else {
        print("ok: \(said)")
    }
    return 0
}

/// `uname -m`: x86_64, aarch64.
func machineArchitecture() -> String {
    var u = utsname()
    uname(&u)
    return withUnsafeBytes(of: &u.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
}
