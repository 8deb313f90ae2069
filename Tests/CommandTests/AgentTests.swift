import Capture
import Foundation
import Media
import QuickTime
import Recorder
import Storage
import Synchronization
import TestSupport
import Testing

/// The agent, run as a user runs it: `vigil run --config FILE`, with a Y4M file made from the
/// synthetic scene as the camera, so every event's true start and end are known.
///
/// End-to-end on purpose: these few run the real binary — its composition root (`RunCommand`:
/// the disk, stderr, signals, exit codes), its files and its log as a user sees them. What
/// the pipeline decides at each frame is tested by stepping it (AgentTests' `EmbeddedAgent`);
/// the threads and the stop in process (`AgentHarness`).
@Suite struct AgentTests {
    static let rate = Rational(15, 1)
    static let frameSeconds = 1.0 / 15

    /// Writes `scene` to a Y4M file and returns its path.
    static func footage(
        _ scene: SyntheticScene, in dir: TemporaryDirectory, name: String = "scene.y4m"
    ) throws -> String {
        let source = try SyntheticSource(scene: scene)
        let path = dir.file(name)
        let writer = try Y4MFileWriter(path: path, width: scene.width, height: scene.height, rate: scene.frameRate)
        while let frame = try source.nextFrame() { try writer.write(frame) }
        try writer.close()
        return path
    }

    /// A new temporary directory (`label`) holding `seconds` of the scene with `objects` as
    /// footage (`scene.y4m`): where each run of the agent on file footage starts. The test
    /// removes it (`defer { dir.remove() }`).
    static func directory(
        _ label: String, footage seconds: Double, objects: [SceneObject]
    ) throws -> (dir: TemporaryDirectory, footage: String) {
        let dir = try TemporaryDirectory(label)
        do {
            return (dir, try footage(scene(seconds: seconds, objects: objects), in: dir))
        } catch {
            dir.remove()
            throw error
        }
    }

    /// `directory(label, footage:objects:)` with a configuration that reads the footage
    /// (`config(dir, footage:realtime:)`).
    static func directory(
        _ label: String, footage seconds: Double, objects: [SceneObject], realtime: Bool
    ) throws -> (dir: TemporaryDirectory, config: String) {
        let (dir, footage) = try directory(label, footage: seconds, objects: objects)
        do {
            return (dir, try config(dir, footage: footage, realtime: realtime))
        } catch {
            dir.remove()
            throw error
        }
    }

    static func scene(seconds: Double, objects: [SceneObject], lights: [LightChange] = []) -> SyntheticScene {
        SyntheticScene(
            width: 320, height: 240, frameRate: rate, pixelFormat: .i420, seed: 7, noiseSigma: 3,
            schedule: SceneSchedule(objects: objects, lightChanges: lights), duration: .init(seconds: seconds))
    }

    static func object(_ enter: Double, _ leave: Double, _ path: SceneObject.Path = .leftToRight(y: 0.5)) -> SceneObject
    {
        SceneObject(
            enter: .init(seconds: enter), leave: .init(seconds: leave), path: path, width: 0.15, height: 0.25,
            brightness: 210)
    }

    /// The configuration of `vigil run` on the synthetic camera (`width`×`height` at 15 fps),
    /// which runs until the agent is stopped, recording into `clips`; `extra`: more groups.
    static func syntheticConfig(
        _ dir: TemporaryDirectory, width: Int = 320, height: Int = 240, extra: String = ""
    ) throws -> String {
        let path = dir.file("vigil.conf")
        try """
        camera = { device = "synthetic"; name = "yard"; width = \(width); height = \(height); fps = 15.0; };
        storage = { path = "clips"; min_free_mb = 1; };
        log = { level = "info"; stats_interval = 0; };
        \(extra)
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func config(
        _ dir: TemporaryDirectory, footage: String, extra: String = "", realtime: Bool = false
    ) throws -> String {
        let text = """
            camera = { device = "file:\(footage)"; name = "yard"; realtime = \(realtime); };
            recording = { pre_roll = 2.0; post_roll = 2.0; max_clip = 10.0; };
            storage = { path = "clips"; min_free_mb = 1; };
            log = { level = "info"; stats_interval = 0; };
            \(extra)
            """
        let path = dir.file("vigil.conf")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A file source with three events (the last long enough to be split), and a light
    /// switching on and off, read as fast as the agent can.
    @Test func recordsEachEventFromBeforeItStartsUntilAfterItEnds() throws {
        let dir = try TemporaryDirectory("vigil-agent")
        defer { dir.remove() }
        let scene = Self.scene(
            seconds: 45,
            objects: [
                Self.object(3, 6), Self.object(14, 17, .rightToLeft(y: 0.4)),
                Self.object(24, 38, .still(x: 0.5, y: 0.5)),
            ], lights: [LightChange(start: .init(seconds: 9), end: .init(seconds: 11), delta: 40)])
        let footage = try Self.footage(scene, in: dir)
        let hookLog = dir.file("hook.log")
        let hook = dir.file("hook.sh")
        try "#!/bin/sh\necho \"$# $1 $2 file=$VIGIL_FILE frames=$VIGIL_FRAMES part=$VIGIL_PART\" >> \(hookLog)\n".write(
            toFile: hook, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: hook)
        let config = try Self.config(dir, footage: footage, extra: "hooks = { on_clip_saved = \"\(hook)\"; };")

        let agent = try AgentProcess(config: config)
        let status = agent.waitForExit(timeout: 300)
        #expect(status == 0, "\(agent.output)")
        #expect(!agent.output.contains("level=error"), "\(agent.output)")
        #expect(agent.output.contains("msg=\"end of source\""))

        let journal = try EventsJournal(directory: dir.file("clips")).records()
        #expect(journal.unreadableLines.isEmpty)
        let records = journal.records
        // Three events; the third (14 s of motion, max_clip 10 s) in two parts. No clip for the light.
        #expect(records.map(\.part) == [1, 1, 1, 2], "\(records)")
        guard records.count == 4 else { return }
        let appearances = scene.appearances(from: .zero, to: .init(seconds: 45))
        #expect(appearances.count == 3)

        for (i, event) in [[records[0]], [records[1]], [records[2], records[3]]].enumerated() {
            let first = event[0]
            let trigger = first.triggerSourceSeconds ?? -1, preRoll = first.preRollSeconds ?? -1
            let enter = appearances[i].enter.seconds, leave = appearances[i].leave.seconds
            // Triggered promptly after the object entered.
            #expect(
                trigger >= enter - 0.001 && trigger <= enter + 0.25,
                "event \(i): trigger at \(trigger) s, object entered at \(enter) s")
            // Starts at the keyframe at or before trigger − pre_roll, at most one GOP earlier.
            let start = trigger - preRoll
            #expect(preRoll >= 2 - 0.001 && preRoll <= 3 + Self.frameSeconds, "event \(i): pre-roll \(preRoll) s")
            // Ends post_roll after the motion ended.
            let end = start + event.reduce(0) { $0 + $1.durationSeconds }
            #expect(
                end >= leave + 2 - Self.frameSeconds && end <= leave + 2 + 0.5,
                "event \(i): ends at \(end) s, object left at \(leave) s")
        }

        var previousEnd: Double?
        for record in records {
            let path = dir.file("clips/" + record.file)
            let probe = try FFprobe.probe(path)
            #expect(try FFmpeg.decodeErrors(path).isEmpty, "\(record.file)")
            #expect(probe.video?["nb_frames"] == "\(record.frames)")
            #expect(probe.video?["nb_read_packets"] == "\(record.frames)")
            #expect(probe.video?["width"] == "320" && probe.video?["height"] == "240")
            // Frames are whole 1/15 s: the frame count says the duration.
            #expect(abs(Double(record.frames) * Self.frameSeconds - record.durationSeconds) < 0.002)
            let packets = try FFprobe.videoPackets(path)
            #expect(packets.first?.isKey == true)
            let keys = packets.filter(\.isKey).map(\.time)
            #expect(
                zip(keys, keys.dropFirst()).allSatisfy { $1 - $0 <= 1.0 + 1e-6 },
                "keyframes more than 1 s apart in \(record.file)")
            // Name, movie creation time and journal agree (the agent runs with TZ=UTC).
            let name = (record.file as NSString).lastPathComponent
            #expect(name.hasPrefix("yard-") && name.hasSuffix(".mov"))
            let created = try #require(probe.formatTags["creation_time"])
            let stamp = name.dropFirst(5).prefix(15)  // yyyyMMdd-HHmmss
            #expect(
                created.replacingOccurrences(of: "-", with: "").replacingOccurrences(of: ":", with: "")
                    .replacingOccurrences(of: "T", with: "-").hasPrefix(String(stamp)),
                "creation time \(created) does not match the name \(name)")
            #expect(record.start.hasPrefix(String(created.prefix(19))))
            #expect(record.camera == "yard" && record.bytes > 0 && (record.peakScore ?? 0) > 0.005)
            // A split's parts follow each other without a gap or an overlap.
            if record.part == 2, let previousEnd {
                let start = (record.triggerSourceSeconds ?? 0) - (record.preRollSeconds ?? 0)
                #expect(abs(start - previousEnd) < 1e-9 || record.preRollSeconds == 0)
            }
            previousEnd = (record.triggerSourceSeconds ?? 0) - (record.preRollSeconds ?? 0) + record.durationSeconds
        }
        // Parts 1 and 2 of the last event: part 2 starts exactly where part 1 ends.
        let p1 = records[2], p2 = records[3]
        let p1End = try #require(ISO8601DateFormatter.fractional.date(from: p1.end))
        let p2Start = try #require(ISO8601DateFormatter.fractional.date(from: p2.start))
        #expect(abs(p1End.timeIntervalSince(p2Start)) < 0.002, "part 1 ends \(p1.end), part 2 starts \(p2.start)")

        // The hook ran once per clip, with the facts as arguments and environment.
        let hookLines = (try? String(contentsOfFile: hookLog, encoding: .utf8))?.split(separator: "\n") ?? []
        #expect(hookLines.count == 4, "\(hookLines)")
        #expect(hookLines.first?.hasPrefix("8 clip_saved ") == true)
        #expect(hookLines.allSatisfy { $0.contains("file=" + dir.file("clips/")) })

        // `vigil clips` lists them.
        let clips = try runTool(builtExecutable("vigil"), ["clips", "--config", config])
        #expect(clips.status == 0)
        #expect(clips.stdout.contains("4 clip(s)"))
    }

    @Test func rotationAndPixelAspectAreWrittenIntoTheClip() throws {
        let (dir, footage) = try Self.directory("vigil-agent", footage: 8, objects: [Self.object(2, 4)])
        defer { dir.remove() }
        let config = try Self.config(dir, footage: footage)
        let text = try String(contentsOfFile: config, encoding: .utf8).replacingOccurrences(
            of: "realtime = false;", with: "realtime = false; rotation = 90;")
        // Footage whose pixels are 4:3 (the Y4M header's A field): the clip says so in pasp.
        let y4m = try Data(contentsOf: URL(fileURLWithPath: footage))
        let header = String(decoding: y4m.prefix(80), as: UTF8.self)
        #expect(header.contains(" A1:1 "))
        try
            (Data(header.prefix { $0 != "\n" }.replacingOccurrences(of: " A1:1 ", with: " A4:3 ").utf8)
            + y4m.drop { $0 != 0x0A })
            .write(to: URL(fileURLWithPath: footage))
        try text.write(toFile: config, atomically: true, encoding: .utf8)
        let agent = try AgentProcess(config: config)
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let records = try EventsJournal(directory: dir.file("clips")).records().records
        #expect(records.count == 1)
        guard let record = records.first else { return }
        let path = dir.file("clips/" + record.file)
        #expect(try FFmpeg.decodeErrors(path).isEmpty)
        let probe = try FFprobe.probe(path)
        #expect(probe.videoRotation == -90)
        #expect(probe.video?["width"] == "320" && probe.video?["height"] == "240")
        #expect(probe.video?["sample_aspect_ratio"] == "4:3")
    }

    /// Killed with SIGKILL in the middle of a clip; the next start repairs it.
    @Test func aClipKilledMidwayIsRepairedAtTheNextStart() throws {
        let (dir, config) = try Self.directory(
            "vigil-agent", footage: 14, objects: [Self.object(2, 12)], realtime: true)
        defer { dir.remove() }
        let agent = try AgentProcess(config: config)
        let clips = dir.file("clips")
        #expect(agent.waitUntil(timeout: 60) { !movieFiles(in: clips).isEmpty }, "\(agent.output)")
        let file = try #require(movieFiles(in: clips).first, "\(agent.output)")
        usleep(3_000_000)  // several fragments
        agent.kill(SIGKILL)
        _ = agent.waitForExit(timeout: 10)
        let path = dir.file("clips/" + file)
        guard case .interrupted(let fragments) = try MovieRepair.inspect(path: path) else {
            Issue.record("the killed clip is not an interrupted movie")
            return
        }
        #expect(fragments >= 2)
        #expect(try FFmpeg.decodeErrors(path).isEmpty, "the killed clip does not decode")
        // The frames a player reads in the killed clip (its revealed fragments): repair keeps
        // them all. (Counted, not derived from the fragments: on a busy host frames are
        // dropped at capture, and a half-second GOP may hold fewer than 15.)
        let readable = Int(try FFprobe.probe(path).video?["nb_read_packets"] ?? "") ?? 0
        #expect(readable > 0, "a player reads nothing in the killed clip")

        let restart = try AgentProcess(config: config)
        // Its journal line goes in once it is repaired (and said so).
        #expect(
            restart.waitUntil(timeout: 60) { journalRecords(in: clips).contains { $0.file == file } },
            "\(restart.output)")
        restart.kill(SIGTERM)
        #expect(restart.waitForExit(timeout: 30) == 0)
        #expect(
            logLines(restart.output, "repaired an interrupted clip").contains { logValue($0, "file") == file },
            "\(restart.output)")
        #expect(try MovieRepair.inspect(path: path) == .complete)
        let probe = try FFprobe.probe(path)
        #expect(try FFmpeg.decodeErrors(path).isEmpty)
        #expect((Int(probe.video?["nb_frames"] ?? "") ?? 0) >= readable, "repair lost frames a player could read")
        // Its journal line, which the killed agent never wrote, says what the file holds.
        let record = try EventsJournal(directory: dir.file("clips")).records().records.first { $0.file == file }
        #expect(record?.repaired == true)
        #expect(record.map { "\($0.frames)" } == probe.video?["nb_frames"])
        #expect(record?.triggerTime == nil && record?.cause == nil)
    }

    /// SIGTERM during a clip finishes it (post-roll cut short) and exits 0 within seconds. A
    /// hook that hangs is killed after its timeout without holding anything up.
    @Test func sigtermFinishesTheOpenClip() throws {
        let (dir, footage) = try Self.directory("vigil-agent", footage: 14, objects: [Self.object(2, 12)])
        defer { dir.remove() }
        let pids = dir.file("pids")
        let hook = try writeScript("echo $$ >> \(pids)\nsleep 60\n", named: "hang.sh", in: dir)
        let config = try Self.config(
            dir, footage: footage, extra: "hooks = { on_event_start = \"\(hook)\"; timeout = 1.0; };", realtime: true)
        let agent = try AgentProcess(config: config)
        #expect(agent.waitUntil(timeout: 60) { !movieFiles(in: dir.file("clips")).isEmpty }, "\(agent.output)")
        // The hook started (in a process group of its own) and is gone while the agent runs on.
        #expect(
            agent.waitUntil(timeout: 30) {
                let hooks = processIDs(inFile: pids)
                return !hooks.isEmpty && hooks.allSatisfy { livingProcesses(inGroup: $0).isEmpty }
            }, "\(agent.output)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 10) == 0, "\(agent.output)")
        #expect(!logLines(agent.output, "hook killed after its timeout").isEmpty, "\(agent.output)")
        let records = try EventsJournal(directory: dir.file("clips")).records().records
        #expect(records.count == 1)
        guard let record = records.first else { return }
        let path = dir.file("clips/" + record.file)
        #expect(try MovieRepair.inspect(path: path) == .complete)
        #expect(try FFmpeg.decodeErrors(path).isEmpty)
        #expect(agent.output.contains("reason=stopped"))
    }

    /// SIGHUP with a broken file keeps the settings; with a good one, the next clip uses it.
    @Test func reloadAppliesToTheNextClip() throws {
        let (dir, config) = try Self.directory(
            "vigil-agent", footage: 14, objects: [Self.object(1, 3), Self.object(9, 11)], realtime: true)
        defer { dir.remove() }
        let original = try String(contentsOfFile: config, encoding: .utf8)
        let agent = try AgentProcess(config: config)
        #expect(agent.waitUntil(timeout: 60) { !journalRecords(in: dir.file("clips")).isEmpty }, "\(agent.output)")

        try (original + "\ncammera = { name = \"x\"; };\n").write(toFile: config, atomically: true, encoding: .utf8)
        agent.kill(SIGHUP)
        // Nothing but the log answers a SIGHUP; the next is sent once this one was taken.
        let rejected = agent.waitFor("msg=\"configuration not reloaded; the settings in use are kept\"", timeout: 10)
        #expect(rejected?.contains("unknown section 'cammera'") == true, "\(agent.output)")

        try original.replacingOccurrences(
            of: "min_free_mb = 1;", with: "min_free_mb = 1; file_pattern = \"reloaded/{camera}-%H%M%S.mov\";"
        )
        .write(toFile: config, atomically: true, encoding: .utf8)
        agent.kill(SIGHUP)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(
            logLines(agent.output, "configuration reloaded; it applies from the next clip").count == 1,
            "\(agent.output)")
        let records = try EventsJournal(directory: dir.file("clips")).records().records
        #expect(records.count == 2)
        #expect(records.first?.file.hasPrefix("reloaded/") == false)
        #expect(records.last?.file.hasPrefix("reloaded/yard-") == true, "\(records.map(\.file))")
        for r in records { #expect(try FFmpeg.decodeErrors(dir.file("clips/" + r.file)).isEmpty) }
    }

    /// A camera that is not there when the agent starts (still enumerating at boot, or
    /// unplugged) is waited for: the agent stays up, says so once, and stops cleanly.
    @Test func aMissingCameraIsWaitedFor() throws {
        let dir = try TemporaryDirectory("vigil-agent")
        defer { dir.remove() }
        let config = dir.file("vigil.conf")
        try "camera = { device = \"\(dir.file("video99"))\"; };\nstorage = { path = \"clips\"; min_free_mb = 1; };\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        let agent = try AgentProcess(config: config)
        // The warning is the behaviour under test: nothing but the log says it.
        let waiting = agent.waitFor("msg=\"camera unavailable; waiting for it\"", timeout: 30)
        #expect(waiting?.contains("video99") == true, "\(agent.output)")
        usleep(1_500_000)  // at least one retry
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 10) == 0, "\(agent.output)")
        #expect(!logLines(agent.output, "vigil running").isEmpty, "\(agent.output)")
        #expect(agent.output.components(separatedBy: "camera unavailable").count == 2, "the outage is logged once")
    }

    @Test func aMissingSourceExits66AndABadConfigExits78() throws {
        let dir = try TemporaryDirectory("vigil-agent")
        defer { dir.remove() }
        let config = dir.file("vigil.conf")
        try "camera = { fps = 0.0; };\nstorage = { path = \"clips\"; };\n".write(
            toFile: config, atomically: true, encoding: .utf8)
        let bad = try runTool(
            builtExecutable("vigil"), ["run", "--config", config], environment: isolatedVigilEnvironment(in: dir))
        #expect(bad.status == 78)
        #expect(bad.stderr.hasPrefix(config + ":1: camera.fps"))
        #expect(
            !FileManager.default.fileExists(atPath: dir.file("clips")),
            "the agent touched storage before checking its configuration")

        _ = try Self.config(dir, footage: dir.file("absent.y4m"))
        let r = try runTool(
            builtExecutable("vigil"), ["run", "--config", config], environment: isolatedVigilEnvironment(in: dir))
        #expect(r.status == 66)
        #expect(r.stderr.contains("absent.y4m"))
    }

    /// Clip names and the journal are in the local time zone, from TZ as the C library reads
    /// it (FoundationEssentials alone would take every zone for UTC): India, +05:30, no DST.
    @Test func clipNamesAndTheJournalFollowTheLocalTimeZone() throws {
        let (dir, config) = try Self.directory("vigil-agent", footage: 8, objects: [Self.object(2, 4)], realtime: false)
        defer { dir.remove() }
        let agent = try AgentProcess(config: config, environment: ["TZ": "Asia/Kolkata"])
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let records = try EventsJournal(directory: dir.file("clips")).records().records
        let record = try #require(records.first, "\(agent.output)")
        #expect(records.count == 1)
        #expect(record.start.hasSuffix("+05:30") && record.end.hasSuffix("+05:30"), "\(record.start) \(record.end)")
        let created = try #require(try FFprobe.probe(dir.file("clips/" + record.file)).formatTags["creation_time"])
        let utc = try #require(
            ISO8601DateFormatter.fractional.date(from: created) ?? ISO8601DateFormatter().date(from: created))
        let local = DateFormatter()
        local.locale = Locale(identifier: "en_US_POSIX")
        local.timeZone = TimeZone(identifier: "Asia/Kolkata")
        local.dateFormat = "yyyyMMdd-HHmmss"
        let name = (record.file as NSString).lastPathComponent
        #expect(name == "yard-\(local.string(from: utc)).mov", "created \(created) (UTC)")
        local.dateFormat = "yyyy-MM-dd"
        #expect(record.file.hasPrefix(local.string(from: utc) + "/"))
    }

    /// A file where the clips' directory should be: exit 73 (sysexits' "cannot create"), as
    /// `vigil run --help` and vigil(8) say, with a message naming the path and the setting.
    @Test func aStorageDirectoryThatCannotBeCreatedExits73() throws {
        let dir = try TemporaryDirectory("vigil-agent")
        defer { dir.remove() }
        let config = try Self.config(dir, footage: dir.file("absent.y4m"))
        #expect(FileManager.default.createFile(atPath: dir.file("clips"), contents: Data("not a directory".utf8)))
        let r = try runTool(
            builtExecutable("vigil"), ["run", "--config", config], environment: isolatedVigilEnvironment(in: dir))
        #expect(r.status == 73, "\(r.stderr)")
        #expect(r.stderr.contains("cannot create the storage directory"))
        #expect(r.stderr.contains("storage.path"))
        #expect(r.stderr.contains(dir.file("clips")) || r.stderr.contains("path=clips"))
    }
}

extension ISO8601DateFormatter {
    nonisolated(unsafe) static let fractional: ISO8601DateFormatter = {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f
    }()
}

extension AgentProcess {
    /// `vigil run --config CONFIG` (plus `environment`), once it has said it is running: the
    /// agent and that line (which names its trigger socket, if it has one: the line is the one
    /// thing that says it started all through). One that does not say so within a minute is
    /// killed, and the test stops there. The test kills the agent it got
    /// (`defer { agent.kill(SIGKILL) }`).
    static func running(
        config: String, environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> (agent: AgentProcess, line: String) {
        let agent = try AgentProcess(config: config, environment: environment)
        let line = agent.waitFor("msg=\"vigil running\"", timeout: 60)
        if line == nil { agent.kill(SIGKILL) }
        return (agent, try #require(line, "\(agent.output)", sourceLocation: sourceLocation))
    }
}
