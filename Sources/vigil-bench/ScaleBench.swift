// Does anything grow with the number of clips (issue 43)? `vigil run` on its synthetic camera
// with `web` on, on storage directories of 0, 10,000 and 100,000 clips (ScaleStore.swift),
// side by side: the start to "source open" (the first start, which makes the catalogue, and
// a restart with it), resident memory at rest, the first screen (`/`), `/api/clips` (its
// first page and one 50 pages deep), and a retention sweep that deletes about 1,000 clips
// with a clip being recorded meanwhile. Printed, never asserted.

import Foundation
import Media
import POSIX
import Recorder

#if canImport(Glibc)
import Glibc
#endif

/// How the agent's start went, from its log.
struct StartFigures {
    /// From the "vigil starting" line to the "source open" line (their `ts=`).
    var seconds: Double
    /// The longest waits between two lines of that span, each with the line that ended it
    /// (what the time was spent before).
    var slowest: [(seconds: Double, before: String)]
    /// The web server's port (from its "web server listening" line).
    var port: Int
}

/// A line's time: its `ts=` (UTC, to the millisecond), in seconds since 1970.
func logTime(_ line: Substring) -> Double? {
    guard line.hasPrefix("ts=") else { return nil }
    let text = String(line.dropFirst(3).prefix { $0 != " " })
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.date(from: text)?.timeIntervalSince1970
}

/// The `msg=` of a log line.
func logMessage(_ line: Substring) -> String { logValue(line, "msg") ?? String(line.prefix(80)) }

/// The configuration of a scale run: the synthetic camera at 640×480 with a motion threshold
/// nothing in its scene reaches (so nothing is recorded unless asked), web on a free port,
/// retention by age off and by size at `maxSizeMB` (0: off).
func writeScaleConfig(_ path: String, storage: String, level: String = "info", maxSizeMB: Int64 = 0) throws {
    try """
    camera = { device = "synthetic"; name = "\(benchCameraName)"; width = 640; height = 480; fps = 30.0; };
    motion = { threshold = 0.4; };
    recording = { pre_roll = 2.0; post_roll = 1.0; max_clip = 10.0; };
    storage = { path = "\(storage)"; max_age_days = 0; max_size_mb = \(maxSizeMB); min_free_mb = 1; };
    web = { enabled = true; listen = "127.0.0.1"; port = 0; };
    log = { level = "\(level)"; stats_interval = 0; };
    """.write(toFile: path, atomically: true, encoding: .utf8)
}

/// Starts `vigil run` and waits for its source to open and its web server to listen.
func startScaleAgent(_ vigil: String, config: String, log: String) throws -> (MeasuredProcess, StartFigures) {
    let agent = try MeasuredProcess(vigil, ["run", "--config", config], outputPath: log)
    guard waitWhileRunning(agent, for: "msg=\"source open\"", timeout: 1800),
        waitWhileRunning(agent, for: "web server listening", timeout: 60)
    else {
        agent.child.signal(.terminate)
        let r = agent.wait()
        throw AgentRunError(description: "vigil run did not open its source and web server:\n\(r.output.suffix(4000))")
    }
    let lines = agent.output.split(separator: "\n")
    guard let first = lines.firstIndex(where: { $0.contains("msg=\"vigil starting\"") }),
        let open = lines.firstIndex(where: { $0.contains("msg=\"source open\"") }),
        let listening = lines.first(where: { $0.contains("msg=\"web server listening\"") }),
        let port = logValue(listening, "address").flatMap({ $0.split(separator: ":").last }).flatMap({ Int($0) }),
        let t0 = logTime(lines[first]), let t1 = logTime(lines[open])
    else {
        throw AgentRunError(description: "vigil run's start lines could not be read:\n\(agent.output.suffix(4000))")
    }
    var gaps: [(seconds: Double, before: String)] = []
    var previous = t0
    for line in lines[(first + 1)...open] {
        guard let t = logTime(line) else { continue }
        gaps.append((t - previous, logMessage(line)))
        previous = t
    }
    return (
        agent,
        StartFigures(seconds: t1 - t0, slowest: Array(gaps.sorted { $0.seconds > $1.seconds }.prefix(3)), port: port)
    )
}

/// Waits until a line of the agent's output contains `text`, up to `timeout` seconds; false
/// if not, or as soon as the agent has ended.
func waitWhileRunning(_ agent: MeasuredProcess, for text: String, timeout: Double) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if agent.output.contains(text) { return true }
        if agent.child.hasEnded() == true { return false }
        usleep(100_000)
    }
    return false
}

/// One HTTP GET with curl: seconds to the last byte, bytes of the body, the status and the
/// `Link` header's next page (its path and query).
func httpGet(
    _ curl: String, _ url: String, in dir: String
) throws -> (seconds: Double, bytes: Int, status: Int, next: String?) {
    let headers = dir + "/headers.txt"
    let curlProcess = Process()
    curlProcess.executableURL = URL(fileURLWithPath: curl)
    curlProcess.arguments = [
        "-s", "-o", "/dev/null", "-D", headers, "-w", "%{http_code} %{time_total} %{size_download}", url,
    ]
    let pipe = Pipe()
    curlProcess.standardOutput = pipe
    curlProcess.standardError = FileHandle.nullDevice
    try curlProcess.run()
    let written = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    curlProcess.waitUntilExit()
    let fields = written.split(separator: " ")
    guard curlProcess.terminationStatus == 0, fields.count == 3, let status = Int(fields[0]),
        let seconds = Double(fields[1]), let bytes = Int(fields[2])
    else {
        throw AgentRunError(description: "curl \(url) failed (exit \(curlProcess.terminationStatus)): \(written)")
    }
    let head = (try? String(contentsOfFile: headers, encoding: .utf8)) ?? ""
    let next = head.split(whereSeparator: \.isNewline).first {
        $0.lowercased().hasPrefix("link:") && $0.contains("rel=\"next\"")
    }
    .flatMap { line in line.split(separator: "<").dropFirst().first?.split(separator: ">").first.map(String.init) }
    return (seconds, bytes, status, next)
}

/// `url` fetched up to `repeats` times (fewer once a minute has gone on it): the median time,
/// the bytes, and the times.
func timedGets(
    _ curl: String, _ url: String, repeats: Int, in dir: String
) throws -> (seconds: Double, bytes: Int, runs: [Double]) {
    var runs: [Double] = []
    var bytes = 0
    while runs.count < repeats && (runs.isEmpty || runs.reduce(0, +) < 60) {
        let r = try httpGet(curl, url, in: dir)
        guard r.status == 200 else { throw AgentRunError(description: "GET \(url) answered \(r.status)") }
        runs.append(r.seconds)
        bytes = r.bytes
    }
    return (median(runs), bytes, runs)
}

/// What a retention sweep that deletes about 1,000 clips did, with a clip recorded meanwhile.
struct SweepFigures {
    var deleted: Int
    /// From the "clip saved" of the part whose close ran the sweep to the last "clip deleted".
    var seconds: Double
    /// From the same "clip saved" to the writer's "clip continues in a new part": how long the
    /// event's next part, being recorded meanwhile, waited for the writer.
    var partOpened: Double
    /// The most the video on disk lagged the camera (a fragment synced after the frames it
    /// ends with were captured, `since_trigger − through`, the pre-roll's fragments aside): in
    /// the event's first part, before the sweep, and in its second part, recorded while the
    /// sweep ran.
    var lagBefore: Double
    var lagDuring: Double
    var droppedAtWriter: Int
}

/// Reloads the running agent with a size limit that leaves all but about 1,000 of `clips`
/// (and debug logging, for the fragment lines), then asks it to record 15 s (`vigil trigger`):
/// the event's first part closes after 10 s (`recording.max_clip`) and its close runs the
/// sweep while the second part is recorded. Stops the agent.
func measureSweep(
    _ vigil: String, agent: MeasuredProcess, config: String, storage: String, clips: Int, sample: SampleClip,
    in dir: String
) throws -> SweepFigures {
    let limit = (Int64(clips - 1000) * sample.totalBytes) >> 20
    try writeScaleConfig(config, storage: storage, level: "debug", maxSizeMB: limit)
    kill(agent.child.pid, SIGHUP)
    guard agent.waitFor("configuration reloaded", timeout: 60) else {
        throw AgentRunError(description: "vigil run did not reload:\n\(agent.output.suffix(4000))")
    }
    let trigger = try MeasuredProcess.run(
        vigil, ["trigger", "--seconds", "15", "--config", config], outputPath: dir + "/trigger.log")
    guard trigger.status == 0 else { throw AgentRunError(description: "vigil trigger failed: \(trigger.output)") }
    let deadline = Date().addingTimeInterval(600)
    while Date() < deadline, agent.child.hasEnded() != true,
        agent.output.components(separatedBy: "msg=\"clip saved\"").count - 1 < 2
    {
        usleep(500_000)
    }
    agent.child.signal(.terminate)
    let r = agent.wait()
    let lines = r.output.split(separator: "\n")
    // The sweep that the close of the event's first part began: from its "clip saved" to the
    // last "clip deleted" line before the next part's "clip saved" (it deletes a batch at a
    // time, the writer's work between them; the next close sweeps again).
    guard let saved = lines.firstIndex(where: { $0.contains("msg=\"clip saved\"") }),
        lines[saved...].contains(where: { $0.contains("msg=\"clip deleted\"") }),
        let t0 = logTime(lines[saved])
    else { throw AgentRunError(description: "vigil run deleted no clip after the reload:\n\(r.output.suffix(4000))") }
    let after = lines[(saved + 1)...]
    let next = after.firstIndex { $0.contains("msg=\"clip saved\"") } ?? lines.endIndex
    let block = lines[(saved + 1)..<next].filter { $0.contains("msg=\"clip deleted\"") }
    guard let t1 = block.last.flatMap(logTime) else {
        throw AgentRunError(description: "vigil run's deletion lines could not be read:\n\(r.output.suffix(4000))")
    }
    let continued = lines[saved...].first { $0.contains("msg=\"clip continues in a new part\"") }.flatMap(logTime)
    func lag(part: String) -> Double {
        lines.filter { $0.contains("msg=\"fragment on disk\"") && logValue($0, "part") == part }.compactMap { line in
            guard let since = logValue(line, "since_trigger").flatMap(Double.init),
                let through = logValue(line, "through").flatMap(Double.init)
            else { return nil }
            // The pre-roll's fragments, written at the trigger, end a GOP or more before it.
            return through > 0 ? since - through : nil
        }.max() ?? .nan
    }
    let stopped = lines.last { $0.contains("msg=\"vigil stopped\"") }
    return SweepFigures(
        deleted: block.count, seconds: t1 - t0, partOpened: continued.map { $0 - t0 } ?? .nan,
        lagBefore: lag(part: "1"), lagDuring: lag(part: "2"),
        droppedAtWriter: stopped.flatMap { logValue($0, "dropped_at_writer_total") }.flatMap { Int($0) } ?? -1)
}

/// The scale rows: one column for each count of clips; returns the raw figures for the JSON.
func measureScale(counts: [Int], repeats: Int, directory: String) throws -> (BenchTable, [String: Any]) {
    let vigil = siblingExecutable("vigil")
    guard FileManager.default.isExecutableFile(atPath: vigil) else {
        throw UsageError("\(vigil) is not built; run `make bench` (it builds vigil and vigil-bench in release mode)")
    }
    guard let curl = which("curl") else { throw UsageError("curl is not installed: apt-get install curl") }
    let columns = counts.map { grouped($0) + " clips" }
    var table = BenchTable(columns: columns)
    // Absolute: the agent reads paths in its configuration from the configuration's directory.
    let dir =
        (directory.hasPrefix("/") ? directory : FileManager.default.currentDirectoryPath + "/" + directory) + "/scale"
    try? FileManager.default.removeItem(atPath: dir)
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    // The clips go at the end; the agents' logs and configurations stay, to be read.
    defer {
        for count in counts { try? FileManager.default.removeItem(atPath: dir + "/clips-\(count)") }
    }

    progress("scale: recording the sample clip…")
    let sample = try ScaleStore.recordSample(vigil: vigil, in: dir)
    progress("scale: the sample clip is \(sample.totalBytes) bytes with its picture; making the directories…")
    var made: [String: Double] = [:]
    for count in counts {
        made[String(count)] = try ScaleStore.make(dir + "/clips-\(count)", count: count, sample: sample)
        progress("scale: \(count) clips made in \(DecimalText.short(made[String(count)] ?? 0, 3)) s")
    }
    var raw: [[String: Any]] = []
    let mb = { (bytes: Int) in Double(bytes) / 1_048_576 }
    for (count, column) in zip(counts, columns) {
        progress("scale: \(column)…")
        let storage = dir + "/clips-\(count)", config = dir + "/scale-\(count).conf"
        var figures: [String: Any] = ["clips": count, "made_s": made[String(count)] ?? 0]
        try writeScaleConfig(config, storage: storage)
        // The first start: no catalogue yet (the migration an earlier version's directory has).
        let (first, firstStart) = try startScaleAgent(vigil, config: config, log: dir + "/first-\(count).log")
        usleep(5_000_000)
        let firstRSS = processStatus("VmRSS", of: String(first.child.pid)) ?? 0
        first.child.signal(.terminate)
        let firstEnd = first.wait()
        table.record(
            "start → \"source open\", first start (makes the catalogue)", unit: "s", column: column,
            value: firstStart.seconds, goal: "–")
        // A restart, the catalogue there.
        let (agent, start) = try startScaleAgent(vigil, config: config, log: dir + "/again-\(count).log")
        do {
            table.record(
                "start → \"source open\", restart (catalogue there)", unit: "s", column: column, value: start.seconds,
                goal: "≤ 2")
            usleep(5_000_000)
            let rss = processStatus("VmRSS", of: String(agent.child.pid)) ?? 0
            let hwm = processStatus("VmHWM", of: String(agent.child.pid)) ?? 0
            table.record(
                "resident memory at rest, 5 s after the restart", unit: "MB", column: column, value: mb(rss),
                goal: "≤ 0 clips' + 5")
            table.record("  after the first start", unit: "MB", column: column, value: mb(firstRSS))
            table.record(
                "  peak during the first start (VmHWM)", unit: "MB", column: column, value: mb(firstEnd.peakRSS))
            table.record("  peak during the restart (VmHWM)", unit: "MB", column: column, value: mb(hwm))
            let base = "http://127.0.0.1:\(start.port)"
            let page = try timedGets(curl, base + "/", repeats: repeats, in: dir)
            table.record(
                "/ (the first screen), to the last byte", unit: "ms", column: column, value: page.seconds * 1000,
                goal: "≤ 100")
            table.record(
                "/ (the first screen)", unit: "KB", column: column, value: Double(page.bytes) / 1000, goal: "≤ 100")
            // A whole day's page (yesterday's 351 clips, with clips before and after it): its
            // timeline marks every clip, its newest hour lists its clips.
            var dayPage: (seconds: Double, bytes: Int, runs: [Double])?
            if count >= ScaleStore.clipsPerDay * 3 {
                let yesterday = ClipRecord.timestamp(Date().addingTimeInterval(-86_400), timeZone: SystemTimeZone())
                    .prefix(10)
                let got = try timedGets(curl, base + "/?day=\(yesterday)", repeats: repeats, in: dir)
                dayPage = got
                table.record(
                    "/?day= (a day of 351 clips), to the last byte", unit: "ms", column: column,
                    value: got.seconds * 1000)
                table.record("/?day= (a day of 351 clips)", unit: "KB", column: column, value: Double(got.bytes) / 1000)
            }
            let list = try timedGets(curl, base + "/api/clips", repeats: repeats, in: dir)
            table.record(
                "/api/clips, first page (100)", unit: "ms", column: column, value: list.seconds * 1000, goal: "≤ 50")
            table.record("/api/clips, first page (100)", unit: "KB", column: column, value: Double(list.bytes) / 1000)
            // Page 50, by the Link headers.
            var path: String? = "/api/clips", depth = 1
            while depth < 50, let here = path {
                path = try httpGet(curl, base + here, in: dir).next
                depth += 1
            }
            var deep: (seconds: Double, bytes: Int, runs: [Double])?
            if let path {
                let got = try timedGets(curl, base + path, repeats: repeats, in: dir)
                deep = got
                table.record(
                    "/api/clips, page 50 (by its Link headers)", unit: "ms", column: column, value: got.seconds * 1000,
                    goal: "≤ 50")
            }
            figures["first_start"] = [
                "seconds": firstStart.seconds,
                "slowest": firstStart.slowest.map { ["seconds": $0.seconds, "before": $0.before] },
                "rss_bytes": firstRSS,
                "peak_rss_bytes": firstEnd.peakRSS,
            ]
            figures["restart"] = [
                "seconds": start.seconds,
                "slowest": start.slowest.map { ["seconds": $0.seconds, "before": $0.before] },
                "rss_bytes": rss, "peak_rss_bytes": hwm,
            ]
            figures["page"] = ["bytes": page.bytes, "seconds": page.runs]
            figures["day_page"] = dayPage.map { ["bytes": $0.bytes, "seconds": $0.runs] } as Any
            figures["api_first_page"] = ["bytes": list.bytes, "seconds": list.runs]
            figures["api_page_50"] = deep.map { ["bytes": $0.bytes, "seconds": $0.runs] } as Any
            for (label, s) in [("first start", firstStart), ("restart", start)] {
                progress(
                    "  \(label): \(DecimalText.short(s.seconds, 3)) s; longest waits: "
                        + s.slowest.map { "\(DecimalText.short($0.seconds, 3)) s before \"\($0.before)\"" }.joined(
                            separator: ", "))
            }
            if count >= 2000 {
                let sweep = try measureSweep(
                    vigil, agent: agent, config: config, storage: storage, clips: count, sample: sample, in: dir)
                table.record(
                    "retention sweep: clips deleted", unit: "clips", column: column, value: Double(sweep.deleted),
                    goal: "1,000")
                table.record(
                    "retention sweep, its start → last \"clip deleted\"", unit: "s", column: column,
                    value: sweep.seconds,
                    goal: "≤ 2")
                table.record(
                    "  writer: the next part, recorded meanwhile, opened after", unit: "s", column: column,
                    value: sweep.partOpened, goal: "not held up")
                table.record(
                    "  writer: clip on disk behind the camera, before", unit: "ms", column: column,
                    value: sweep.lagBefore * 1000)
                table.record(
                    "  writer: clip on disk behind the camera, during", unit: "ms", column: column,
                    value: sweep.lagDuring * 1000)
                table.record(
                    "  writer: video samples dropped (queue full)", unit: "samples", column: column,
                    value: Double(sweep.droppedAtWriter), goal: "0")
                figures["sweep"] = [
                    "deleted": sweep.deleted, "seconds": sweep.seconds, "next_part_opened_s": sweep.partOpened,
                    "lag_before_s": sweep.lagBefore, "lag_during_s": sweep.lagDuring,
                    "dropped_at_writer": sweep.droppedAtWriter,
                ]
            } else {
                agent.child.signal(.terminate)
                _ = agent.wait()
            }
        } catch {
            // Not left running when a measurement fails: ended and reaped (nil: reaped already).
            if agent.child.hasEnded() != nil {
                agent.child.signal(.terminate)
                _ = agent.wait()
            }
            throw error
        }
        raw.append(figures)
    }
    return (table, ["sample_bytes": sample.totalBytes, "runs": raw])
}

/// A count with its thousands apart: 100,000.
func grouped(_ n: Int) -> String {
    var digits = String(n)
    var i = digits.count - 3
    while i > 0 {
        digits.insert(",", at: digits.index(digits.startIndex, offsetBy: i))
        i -= 3
    }
    return digits
}

/// A line of progress, out at once (stdout to a file is buffered).
func progress(_ text: String) {
    print(text)
    fflush(nil)  // every stream: `stdout` itself is a C global Swift 6 will not read
}
