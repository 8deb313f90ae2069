import Capture
import Foundation
import Media
import POSIX
import TestSupport

/// The scenarios of one VM run, and what they leave for the host to check.
struct Context {
    let out: String
    let vigil: String
    var expectations = Expectations()
    let monitor = StarvationMonitor.shared

    mutating func run(_ scenario: Scenario, _ r: Report) {
        _ = monitor.take()
        defer {
            let worst = monitor.take()
            r.figure("largest scheduling delay in the VM during this scenario: \(fixed(worst * 1000, 0)) ms")
            if worst > StarvationMonitor.starvedAbove {
                r.note(
                    "the VM was starved of CPU (is the host busy?): timing checks in this scenario can fail for that reason alone"
                )
            }
        }
        switch scenario {
        case .probe: AgentScenarios.probe(r, vigil: vigil, out: out)
        case .negotiation: CameraScenarios.negotiation(r)
        case .strides: CameraScenarios.strides(r)
        case .lost: CameraScenarios.lostFrames(r)
        case .unplug: CameraScenarios.unplug(r)
        case .latency: expectations.pictureLatency = CameraScenarios.pictureLatency(r)
        case .audio: AudioScenarios.loopback(r)
        case .record: expectations.clips += AgentScenarios.record(r, vigil: vigil, out: out)
        case .recover: expectations.clips += AgentScenarios.recover(r, vigil: vigil, out: out)
        case .hd: expectations.clips += AgentScenarios.hd(r, vigil: vigil, out: out)
        case .codec: CodecScenarios.run(r, vigil: vigil, out: out)
        case .libcamera: expectations.clips += LibcameraScenarios.run(r, vigil: vigil, out: out)
        }
    }

    func save(_ r: Report) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do {
            try encoder.encode(expectations).write(to: URL(fileURLWithPath: out + "/expectations.json"))
        } catch {
            r.fail("cannot write \(out)/expectations.json: \(error)")
        }
    }
}

enum AgentScenarios {
    /// How long the scenarios wait for the agent to react (a clip to start or be saved, an
    /// unplug to be noticed): a limit, not a speed to meet. A starved VM (a busy host,
    /// `DEVICE_TESTS_STRESS=1`) runs the agent at a few frames a second, and the detector
    /// confirms motion over frames, so a clip may start many seconds after the bars move.
    static let eventTimeout = 30.0

    /// `vigil probe`: every camera and microphone, and a block that pastes into a valid config.
    static func probe(_ r: Report, vigil: String, out: String) {
        r.section("vigil probe")
        do {
            try Vivid.reset()
            try Vivid.makeByIdLink()
            let all = try Child.run(vigil, ["probe"])
            try all.stdout.write(toFile: out + "/probe.txt", atomically: true, encoding: .utf8)
            r.figure(
                "vigil probe (saved in probe.txt):\n"
                    + all.stdout.split(separator: "\n", omittingEmptySubsequences: false)
                    .filter { !$0.contains("other formats") }.map { "       " + $0 }.joined(separator: "\n"))
            r.check(all.status == 0 && all.stderr.isEmpty, "exits 0, nothing on stderr", "\(all.status) \(all.stderr)")
            r.check(
                all.stdout.contains(
                    "/dev/video0 — vivid (driver vivid, platform:vivid-000)\n  also \(Vivid.byIdLink)\n"),
                "lists vivid with its stable name")
            r.check(
                all.stdout.contains("    NV12  Y/UV 4:2:0\n")
                    && all.stdout.contains("          640x480     25, 15, 12.5, 10, 5, 4, 2, 1 fps\n")
                    && all.stdout.contains("          1280x720    12.5, 10, 5, 4, 2, 1 fps\n"),
                "lists formats with their sizes and rates")
            r.check(
                all.stdout.contains(
                    "/dev/video1 — vivid (driver vivid, platform:vivid-000)\n  this is a video output device, not a camera\n"
                ), "says which nodes are not cameras")
            r.check(
                all.stdout.contains(
                    "hw:CARD=Loopback,DEV=1 — Loopback: Loopback PCM (card 0, device 1)\n  8000 to 192000 Hz, 1 to 32 channels, 16-bit samples\n"
                ),
                "lists the loopback's capture devices with rates and channels")

            // The blocks paste into a configuration that `vigil check` accepts.
            let camera = block(all.stdout, after: "/dev/video0 —", opening: "    camera = {")
            let audio = block(all.stdout, after: "hw:CARD=Loopback,DEV=1 —", opening: "    audio = {")
            let config = out + "/pasted.conf"
            try (camera + audio).write(toFile: config, atomically: true, encoding: .utf8)
            let checked = try Child.run(vigil, ["check", "--config", config])
            r.check(
                checked.status == 0 && checked.stdout.contains("device = \"\(Vivid.byIdLink)\";")
                    && checked.stdout.contains("fps = 12.5;"),
                "the pasted camera and audio blocks are a valid configuration", camera + audio + checked.stderr)

            let one = try Child.run(vigil, ["probe", "--size", "640x480", "--fps", "30", Vivid.byIdLink])
            r.check(
                one.status == 0 && one.stdout.contains("(the closest to 640x480 at 30 fps: NV12 640x480 at 25 fps)")
                    && !one.stdout.contains("Microphones"),
                "probe DEVICE shows that camera only, with the mode for --size and --fps",
                one.stdout.split(separator: "\n").suffix(7).joined(separator: " | "))
            let mic = try Child.run(vigil, ["probe", "hw:CARD=Loopback,DEV=1"])
            r.check(
                mic.status == 0 && mic.stdout.contains("8000 to 192000 Hz") && !mic.stdout.contains("Cameras"),
                "probe hw:... shows that microphone only")
            let notCamera = try Child.run(vigil, ["probe", "/dev/video1"])
            r.check(notCamera.status == 66, "probe of a node that is not a camera exits 66", "\(notCamera.status)")
            let missing = try Child.run(vigil, ["probe", "/dev/video9"])
            r.check(
                missing.status == 66 && missing.stdout.contains("no such device — is the camera plugged in?"),
                "probe of a missing node says so", missing.stdout)
        } catch {
            r.fail("\(error)")
        }
    }

    /// The lines of a `name = { ... };` block that follows a heading.
    static func block(_ text: String, after heading: String, opening: String) -> String {
        guard let start = text.range(of: heading),
            let open = text.range(of: opening, range: start.upperBound..<text.endIndex),
            let close = text.range(of: "    };\n", range: open.upperBound..<text.endIndex)
        else { return "" }
        return String(text[open.lowerBound..<close.upperBound])
    }

    /// Makes the scenario's directory `dir` and writes its `vigil.conf` there; returns the
    /// configuration's path.
    static func writeConfig(
        in dir: String, camera: String, width: Int, height: Int, fps: Double, audio: String?, storage: String,
        preRoll: Double, postRoll: Double
    ) throws -> String {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/vigil.conf"
        try """
        camera = { device = "\(camera)"; name = "vivid"; width = \(width); height = \(height); fps = \(fps); };
        audio = { enabled = \(audio != nil); device = "\(audio ?? "default")"; rate = 48000; channels = 1; };
        recording = { pre_roll = \(preRoll); post_roll = \(postRoll); };
        storage = { path = "\(storage)"; min_free_mb = 10; };
        encoder = { threads = 1; };
        log = { level = "info"; stats_interval = 2; };

        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Clips the agent saved, from its log: (file, reason).
    static func savedClips(_ agent: AgentProcess, storage: String) -> [(file: String, reason: String)] {
        agent.entries("clip saved").compactMap { line in
            guard let file = logValue(line, "file") else { return nil }
            return (storage + "/" + file, logValue(line, "reason") ?? "")
        }
    }

    static func sum(_ field: String, _ agent: AgentProcess) -> Int {
        agent.entries("stats").compactMap { logValue($0, field).flatMap(Int.init) }.reduce(0, +)
    }

    /// A clip from vivid with sound from the loopback: a tone starts at the instant the picture
    /// turns white, so the host can measure how well sound and picture line up in the clip.
    static func record(_ r: Report, vigil: String, out: String) -> [ClipExpectation] {
        r.section("vigil run: a clip from vivid 640x480@25 with sound from the loopback")
        let dir = out + "/record", storage = dir + "/clips"
        let player = TonePlayer()
        var expected: [ClipExpectation] = []
        do {
            try Vivid.reset()
            let configPath = try writeConfig(
                in: dir, camera: Vivid.node, width: 640, height: 480, fps: 25, audio: AudioScenarios.capture,
                storage: storage, preRoll: 2, postRoll: 2
            )
            player.start()
            usleep(300_000)
            let agent = try AgentProcess(vigil: vigil, config: configPath, logPath: dir + "/agent.log")
            r.check(
                agent.waitFor("vigil running", timeout: 20) && agent.waitFor("microphone open", timeout: 10),
                "the agent starts with camera and microphone")
            for line in agent.entries("camera negotiated") + agent.entries("microphone negotiated") { r.figure(line) }
            r.check(
                agent.entries("camera negotiated").first.map {
                    $0.contains("pixel_format=NV12") && $0.contains("size=640x480") && $0.contains("fps=25")
                } ?? false,
                "the agent negotiates NV12 640x480 at 25 fps")
            Thread.sleep(forTimeInterval: 3)
            try Vivid.set("horizontal_movement", Vivid.Movement.fastRight.rawValue)
            r.check(
                agent.waitUntil(timeout: eventTimeout) { !movieFiles(in: storage).isEmpty },
                "moving colour bars start a clip")
            Thread.sleep(forTimeInterval: 1)
            // The change must fall in a clip. A starved agent sees few frames of the moving bars,
            // and may end the event while they move (seen at about 9 frames a second): then wait
            // for the next clip the bars start.
            let started = movieFiles(in: storage).count
            if unsavedClips(in: storage).isEmpty {
                r.note("the event ended while the bars moved (a starved agent?): waiting for the next clip")
                agent.waitUntil(timeout: eventTimeout) { movieFiles(in: storage).count > started }
                Thread.sleep(forTimeInterval: 0.5)
            }
            let pattern = try Vivid.Control("test_pattern")
            guard let onset = player.startTone() else {
                r.fail("the tone did not start: \(player.failure ?? "timeout")")
                _ = agent.stop()
                return []
            }
            Clock.sleep(untilMonotonic: onset)
            let before = Clock.monotonic.now()
            try pattern.set(Vivid.Pattern.white.rawValue)
            let after = Clock.monotonic.now()
            let changeAfterOnset = (before - onset).seconds + (after - before).seconds / 2
            r.figure(
                "tone onset at \(onset) (monotonic); picture turned white \(fixed(changeAfterOnset * 1000, 2)) ms later (the ioctl took \(fixed((after - before).seconds * 1000, 2)) ms)"
            )
            Thread.sleep(forTimeInterval: 1.5)
            try Vivid.set("horizontal_movement", Vivid.Movement.none.rawValue)
            r.check(
                agent.waitUntil(timeout: eventTimeout) { unsavedClips(in: storage).isEmpty },
                "the clip is saved after the post-roll")
            // The driver drops frames now and then (still picture: no clip): the stats line counts them.
            let lostBefore = sum("lost_at_source", agent)
            let statsBefore = agent.entries("stats").count
            try Vivid.set("test_pattern", Vivid.Pattern.colorbar75.rawValue)
            try Vivid.set("percentage_of_dropped_buffers", 20)
            agent.waitFor("stats", count: statsBefore + 3, timeout: 15)
            try Vivid.set("percentage_of_dropped_buffers", 0)
            let lostDuring = sum("lost_at_source", agent) - lostBefore
            r.figure("with vivid dropping 20% of its buffers for two stats intervals: lost_at_source \(lostDuring)")
            r.check(lostDuring >= 5, "the agent counts frames the driver dropped as lost_at_source", "\(lostDuring)")
            let status = agent.stop()
            r.check(status == 0, "SIGTERM stops the agent with status 0", "\(status.map(String.init) ?? "killed")")
            for line in agent.entries("stats").prefix(4) { r.figure(line) }
            let lost = sum("lost_at_source", agent), dropped = sum("dropped_at_capture", agent)
            r.figure("lost_at_source \(lost), dropped_at_capture \(dropped) over the run")
            r.check(agent.entries("camera lost").isEmpty, "the camera was never lost")
            let clips = savedClips(agent, storage: storage)
            r.check(clips.count >= 1, "clips saved: \(clips.count)", clips.map(\.file).joined(separator: ", "))
            // The clip that holds the change is the last one saved.
            for (index, clip) in clips.enumerated() {
                expected.append(
                    ClipExpectation(
                        file: clip.file, scenario: "record", width: 640, height: 480, frameRate: "25/1", audio: true,
                        changeAfterOnset: index == clips.count - 1 ? changeAfterOnset : nil))
            }
        } catch {
            r.fail("\(error)")
        }
        let (failure, underruns) = player.stop()
        r.check(failure == nil, "the playback side ran", failure ?? "")
        if underruns > 0 { r.note("playback underruns: \(underruns)") }
        return expected
    }

    /// 1280x720 at 30 fps asked of a camera that gives 12.5 there: a warning, and clips at the
    /// size and rate it delivers.
    static func hd(_ r: Report, vigil: String, out: String) -> [ClipExpectation] {
        r.section("vigil run: 1280x720 at 30 fps asked, vivid gives 12.5")
        let dir = out + "/hd", storage = dir + "/clips"
        var expected: [ClipExpectation] = []
        do {
            try Vivid.reset()
            let configPath = try writeConfig(
                in: dir, camera: Vivid.node, width: 1280, height: 720, fps: 30, audio: nil, storage: storage,
                preRoll: 1, postRoll: 1
            )
            let agent = try AgentProcess(vigil: vigil, config: configPath, logPath: dir + "/agent.log")
            r.check(agent.waitFor("vigil running", timeout: 20), "the agent starts")
            let warning = agent.entries(
                "the camera does not offer the requested size or rate; clips use what it delivers (`vigil probe` lists its modes)"
            )
            for line in agent.entries("camera negotiated") + warning { r.figure(line) }
            r.check(
                warning.first.map { $0.contains("requested=1280x720@30") && $0.contains("delivered=1280x720@12.5") }
                    ?? false,
                "the agent warns that it gets 12.5 fps, not 30")
            Thread.sleep(forTimeInterval: 2)
            try Vivid.set("horizontal_movement", Vivid.Movement.fastRight.rawValue)
            r.check(
                agent.waitUntil(timeout: eventTimeout) { !movieFiles(in: storage).isEmpty }, "motion starts a clip")
            // Bars that stop where they were not before still differ from the learned
            // background (for 30 s, as a parked car would): stop the agent while it records.
            Thread.sleep(forTimeInterval: 3)
            let status = agent.stop()
            try Vivid.set("horizontal_movement", Vivid.Movement.none.rawValue)
            r.check(status == 0, "SIGTERM stops the agent with status 0", "\(status.map(String.init) ?? "killed")")
            // Under load the detector may end the event and start another while the bars move
            // (a starved agent sees few frames): what must hold is that no clip is lost — the one
            // open at the stop finished on the way out like the others.
            let started = agent.entries("clip started").count, saved = agent.entries("clip saved")
            r.check(
                !saved.isEmpty && saved.count == started, "every clip started is saved, the one open at the stop too",
                "\(started) started; saved: " + saved.map { logValue($0, "reason") ?? "?" }.joined(separator: ", "))
            for line in agent.entries("stats").suffix(2) { r.figure(line) }
            for clip in savedClips(agent, storage: storage) {
                expected.append(
                    ClipExpectation(
                        file: clip.file, scenario: "hd", width: 1280, height: 720, frameRate: "25/2", audio: false,
                        changeAfterOnset: nil))
            }
            r.check(!expected.isEmpty, "clips saved: \(expected.count)")
        } catch {
            r.fail("\(error)")
        }
        return expected
    }

    /// The camera is pulled while a clip records and comes back: the clip is closed cleanly,
    /// each change is logged once, recording resumes. The microphone is missing all along:
    /// clips carry video only.
    static func recover(_ r: Report, vigil: String, out: String) -> [ClipExpectation] {
        r.section("vigil run: camera unplugged while recording, module reloaded, camera back; no microphone")
        let dir = out + "/recover", storage = dir + "/clips"
        var expected: [ClipExpectation] = []
        do {
            try Vivid.reset()
            try Vivid.makeByIdLink()
            let configPath = try writeConfig(
                in: dir, camera: Vivid.byIdLink, width: 640, height: 480, fps: 25, audio: "hw:CARD=NoSuchCard,DEV=0",
                storage: storage, preRoll: 1, postRoll: 3
            )
            let agent = try AgentProcess(vigil: vigil, config: configPath, logPath: dir + "/agent.log")
            r.check(agent.waitFor("vigil running", timeout: 20), "the agent starts")
            r.check(
                agent.waitFor("microphone unavailable; recording video only", timeout: 10),
                "a missing microphone is logged, video goes on")
            Thread.sleep(forTimeInterval: 2)
            try Vivid.set("horizontal_movement", Vivid.Movement.fastRight.rawValue)
            r.check(
                agent.waitUntil(timeout: eventTimeout) { !movieFiles(in: storage).isEmpty }, "motion starts a clip")
            Thread.sleep(forTimeInterval: 1.5)

            try Vivid.unplug()
            let pulled = Date()
            r.check(
                agent.waitFor("camera lost; closing the clip and retrying", timeout: eventTimeout),
                "the agent notices the unplug"
            )
            r.check(
                agent.waitUntil(timeout: eventTimeout) { !journalRecords(in: storage).isEmpty },
                "and closes the open clip")
            r.figure("seen \(fixed(Date().timeIntervalSince(pulled), 2)) s after the unplug:")
            for line in agent.entries("camera lost; closing the clip and retrying") + agent.entries("clip saved") {
                r.figure(line)
            }
            // The agent has let go of the device: the module can go, as with `modprobe -r vivid`.
            var unloaded = false
            for _ in 0..<30 where !unloaded {
                unloaded = Vivid.run("/sbin/modprobe", ["-r", "vivid"]) == 0
                if !unloaded { usleep(200_000) }
            }
            r.check(unloaded, "modprobe -r vivid succeeds once the agent has closed the camera")
            Thread.sleep(forTimeInterval: 3)  // the agent retries meanwhile
            r.check(Vivid.run("/sbin/modprobe", ["vivid"]) == 0, "modprobe vivid")
            try Vivid.waitForNode()
            try Vivid.reset()
            r.check(agent.waitFor("camera back", timeout: 40), "the agent reopens the camera by its stable name")
            for line in agent.entries("camera back") + agent.entries("camera negotiated").suffix(1) { r.figure(line) }
            try Vivid.set("horizontal_movement", Vivid.Movement.fastRight.rawValue)
            r.check(
                agent.waitUntil(timeout: eventTimeout) { movieFiles(in: storage).count >= 2 },
                "recording resumes: motion starts a new clip")
            Thread.sleep(forTimeInterval: 2)
            try Vivid.set("horizontal_movement", Vivid.Movement.none.rawValue)
            let status = agent.stop()
            r.check(status == 0, "SIGTERM stops the agent with status 0", "\(status.map(String.init) ?? "killed")")
            r.check(
                agent.entries("camera lost; closing the clip and retrying").count == 1
                    && agent.entries("camera back").count == 1,
                "the outage is logged once when it starts and once when it ends, not per retry")
            r.check(
                agent.entries("microphone unavailable; recording video only").count == 1,
                "the missing microphone is logged once")
            let clips = savedClips(agent, storage: storage)
            r.check(
                clips.count >= 2, "a clip before the unplug and one after",
                clips.map { "\($0.file) (\($0.reason))" }.joined(separator: ", "))
            for clip in clips {
                expected.append(
                    ClipExpectation(
                        file: clip.file, scenario: "recover", width: 640, height: 480, frameRate: "25/1", audio: false,
                        changeAfterOnset: nil))
            }
        } catch {
            r.fail("\(error)")
        }
        return expected
    }
}
