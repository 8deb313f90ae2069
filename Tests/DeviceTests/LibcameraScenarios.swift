import Capture
import Foundation
import Glibc
import Media
import POSIX
import TestSupport

/// The libcamera source against a real kernel camera: vimc through libcamera's vimc pipeline,
/// the vigil-libcamera plugin built beside the binaries under test.
enum LibcameraScenarios {
    /// libcamera 0.0.3's vimc pipeline makes widths and heights that are multiples of 6 (its
    /// scaler triples the sensor's size, which must be even): 648x480 exactly, 640x480 as 636x480.
    static let width = 648, height = 480

    /// vimc has no frame rate control: its streamer thread makes a frame, then sleeps a 60th of
    /// a second, so frames come no faster than 60 a second (slower under emulation).
    static let vimcRate = "60/1"

    static func run(_ r: Report, vigil: String, out: String) -> [ClipExpectation] {
        r.section("libcamera: vimc through the vigil-libcamera plugin")
        do {
            try Vimc.load()
        } catch {
            r.fail("vimc: \(error)")
            return []
        }
        listing(r, vigil: vigil)
        direct(r)
        memory(r)
        var clips = agent(r, vigil: vigil, out: out)
        clips += libcamerify(r, vigil: vigil, out: out)
        // Last: after it, libcamera cannot be used in this process.
        unbind(r)
        return clips
    }

    /// `cam -l` and `vigil probe` name the same cameras.
    static func listing(_ r: Report, vigil: String) {
        let cam = Vimc.listed()
        r.figure("cam -l: \(cam.joined(separator: ", "))")
        let probe = (try? Child.run(vigil, ["probe"]))?.stdout ?? ""
        let section = probe.components(separatedBy: "Cameras (libcamera)").dropFirst().first ?? ""
        let ours = section.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("libcamera:") else { return nil }
            let name = line.dropFirst("libcamera:".count)
            return String(name.components(separatedBy: " — ").first ?? String(name))
        }
        r.figure("vigil probe: \(ours.joined(separator: ", "))")
        r.check(!cam.isEmpty && cam == ours, "cam -l and vigil probe list the same cameras", "\(cam) vs \(ours)")
        r.check(
            section.contains("BGR888") || section.contains("RGB888"),
            "vigil probe lists vimc's formats (RGB, converted)",
            section.split(separator: "\n").prefix(6).joined(separator: " | "))
        let one = (try? Child.run(vigil, ["probe", "libcamera:" + Vimc.cameraID]))
        r.check(
            one?.status == 0 && one?.stdout.contains("device = \"libcamera\";") == true,
            "vigil probe libcamera:ID shows that camera with a block to paste", one?.stderr ?? "")
    }

    /// Frames straight from the source: size, timestamps on the capture clock, the rate, the picture.
    static func direct(_ r: Report) {
        do {
            let opened = Clock.monotonic.now()
            let camera = try LibcameraSource(
                camera: nil, request: CameraRequest(width: width, height: height, fps: 30))
            r.figure("\(width)x\(height) at 30 asked: \(camera.negotiation)")
            r.check(
                camera.format.width == width && camera.format.height == height && camera.format.pixelFormat == .i420,
                "\(width)x\(height) is delivered as I420", "\(camera.format)")
            try Vimc.setPattern(.white)
            var frames = try take(camera, count: 90)
            let first = frames.first!, last = frames.last!
            let increasing = zip(frames, frames.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp }
            let onClock = frames.allSatisfy { $0.timestamp >= opened && $0.timestamp <= $0.dequeued }
            r.check(increasing, "timestamps strictly increase")
            r.check(onClock, "timestamps are on the capture clock: after the open, before each frame is taken")
            let span = (last.timestamp - first.timestamp).seconds
            let taken = (last.dequeued - first.dequeued).seconds
            let numbered = Int(last.sequence - first.sequence)
            r.figure(
                "\(frames.count) frames in \(fixed(taken, 2)) s taken, \(fixed(span, 2)) s by their timestamps: \(fixed(Double(frames.count - 1) / max(span, 0.001), 1)) fps; \(numbered + 1 - frames.count) lost by their sequence numbers, \(camera.lostFrames) counted lost"
            )
            r.timingCheck(
                abs(span - taken) < 0.25, "frames counted against time: their timestamps span the time they took",
                "\(fixed(span, 3)) s vs \(fixed(taken, 3)) s")
            r.check(
                numbered + 1 - frames.count == camera.lostFrames, "lost frames are the gaps in the sequence numbers")
            let white = frames.suffix(10).map(\.luma).reduce(0, +) / 10
            try Vimc.setPattern(.black)
            frames = try take(camera, count: 30)
            let black = frames.suffix(10).map(\.luma).reduce(0, +) / 10
            r.figure("mean luma: white pattern \(fixed(white, 1)), black \(fixed(black, 1))")
            r.check(
                white > black + 80, "the picture is the sensor's: its white and black patterns (RGB converted to I420)")
            try Vimc.setPattern(.colorbar75)
        } catch {
            r.fail("\(width)x\(height): \(error)")
        }
        do {
            let camera = try LibcameraSource(
                camera: Vimc.cameraID, request: CameraRequest(width: 640, height: 480, fps: 30))
            let frames = try take(camera, count: 10)
            r.figure("640x480 asked: \(camera.negotiation)")
            r.check(
                (camera.format.width, camera.format.height) != (640, 480)
                    && camera.format.width == camera.negotiation.width
                    && camera.format.height == camera.negotiation.height && frames.count == 10,
                "a size vimc cannot make is rounded, and frames come at the rounded size",
                "\(camera.format.width)x\(camera.format.height)")
        } catch {
            r.fail("640x480: \(error)")
        }
    }

    /// vimc unbound while streaming. libcamera 0.0.3's vimc pipeline (like the Raspberry Pi's)
    /// does not tell its camera that the device went: the source sees the camera's nodes gone,
    /// says so, and leaves libcamera alone (stopping the camera would abort the process); only a
    /// new process can open the camera again (the agent exits for its service to restart it: see
    /// `agent`).
    static func unbind(_ r: Report) {
        do {
            let camera = try LibcameraSource(
                camera: nil, request: CameraRequest(width: width, height: height, fps: 30))
            try pullWhileStreaming(
                camera, r, pull: { try Vimc.unbind() }, upTo: 500,
                "unbinding while streaming ends the stream, saying a restart is needed, without aborting",
                label: "unbinding", ifNoError: "frames went on after vimc was unbound",
                figure: "unbound while streaming",
                places: 2,
                judge: {
                    if case .needsRestart = $0 { $0.description.contains("vigil must be restarted") } else { nil }
                })
            try Vimc.waitForCamera(present: false)
            r.expectError(
                "the same process then refuses libcamera cameras and says why", label: "opening again",
                ifNoError: "libcamera opened a camera again in the same process",
                figure: { "opening again in the same process: \($0)" },
                judge: { if case .needsRestart = $0 { true } else { nil } }
            ) { () throws(CaptureError) in
                _ = try LibcameraSource(camera: nil, request: CameraRequest(width: width, height: height, fps: 30))
            }
            // vimc stays unbound: bound again, the camera would come back into this process's
            // camera manager under the id it still holds, and libcamera aborts on that.
        } catch {
            r.fail("unbind: \(error)")
        }
    }

    /// Frames through the source with the memory of the process measured: it must stay flat.
    static func memory(_ r: Report) {
        let count = Int(ProcessInfo.processInfo.environment["VIGIL_LIBCAMERA_FRAMES"] ?? "") ?? 10_000
        do {
            // A starved VM's clocks jump by seconds now and then: this measures memory, not stalls.
            let camera = try LibcameraSource(
                camera: nil, request: CameraRequest(width: 320, height: 240, fps: 30), stallTimeout: .init(seconds: 30))
            // Pools and libcamera's own allocations settle in the first frames.
            _ = try take(camera, count: 1000)
            let before = residentBytes()
            let start = Clock.monotonic.now()
            var taken = 0
            while taken < count {
                guard try camera.nextFrame() != nil else { break }
                taken += 1
            }
            let after = residentBytes()
            r.figure(
                "\(taken) frames of 320x240 in \(fixed((Clock.monotonic.now() - start).seconds, 1)) s; resident \(before >> 10) KiB before, \(after >> 10) KiB after"
            )
            r.check(
                taken == count && after - before < 2 << 20,
                "\(count) frames with the resident memory flat (under 2 MiB more)",
                "\((after - before) >> 10) KiB more")
        } catch {
            r.fail("memory: \(error)")
        }
    }

    /// `vigil run` on `camera.device = "libcamera"`: a clip, then vimc unbound while recording
    /// (the agent saves the clip and exits for its service to restart it), restarted while the
    /// camera is away, bound again (recording resumes), then stopped and started again.
    static func agent(_ r: Report, vigil: String, out: String) -> [ClipExpectation] {
        let dir = out + "/libcamera", storage = dir + "/clips"
        var expected: [ClipExpectation] = []
        do {
            let configPath = try AgentScenarios.writeConfig(
                in: dir, camera: "libcamera", width: width, height: height, fps: 30, audio: nil, storage: storage,
                preRoll: 1, postRoll: 2
            )
            let agent = try AgentProcess(vigil: vigil, config: configPath, logPath: dir + "/agent.log")
            r.check(
                agent.waitFor("vigil running", timeout: AgentScenarios.eventTimeout * 2),
                "vigil run starts on camera.device = \"libcamera\"")
            for line in agent.entries("source open") { r.figure(line) }
            // Clips are started with `vigil trigger`: vimc's patterns change the whole picture at
            // once, which the detector takes for a light switched on, not motion.
            r.check(
                trigger(vigil, config: configPath, seconds: 60)
                    && agent.waitUntil(timeout: AgentScenarios.eventTimeout) { !movieFiles(in: storage).isEmpty },
                "vigil trigger starts a clip")
            Thread.sleep(forTimeInterval: 2)
            try Vimc.unbind()
            let lostMessage =
                "camera lost for this process; closing the clip and stopping so that the service restarts vigil"
            r.check(
                agent.waitFor(lostMessage, timeout: AgentScenarios.eventTimeout),
                "vimc unbound while recording: the agent says the camera is lost and that it stops for a restart")
            r.check(
                agent.waitUntil(timeout: AgentScenarios.eventTimeout) { !journalRecords(in: storage).isEmpty },
                "and saves the open clip")
            for line in agent.entries(lostMessage) { r.figure(line) }
            for _ in 0..<300 where agent.isRunning { usleep(100_000) }  // it exits by itself
            let status = agent.stop(timeout: 30)
            r.check(status == 65, "it exits 65 (its service restarts it)", "\(status.map(String.init) ?? "killed")")
            // As systemd does (Restart=on-failure): started again while the camera is away.
            let restarted = try AgentProcess(vigil: vigil, config: configPath, logPath: dir + "/agent-restarted.log")
            r.check(
                restarted.waitFor("camera unavailable; waiting for it", timeout: 30),
                "restarted while vimc is unbound, the agent waits for the camera")
            try Vimc.bind()
            r.check(restarted.waitFor("camera open", timeout: 60), "bound again: the camera opens")
            let before = movieFiles(in: storage).count
            r.check(
                trigger(vigil, config: configPath, seconds: 2)
                    && restarted.waitUntil(timeout: AgentScenarios.eventTimeout) {
                        movieFiles(in: storage).count > before
                    },
                "recording resumes: vigil trigger starts a new clip")
            r.check(
                restarted.waitUntil(timeout: AgentScenarios.eventTimeout) {
                    journalRecords(in: storage).count > before
                }, "the clip is saved")
            let stopped = restarted.stop()
            r.check(stopped == 0, "SIGTERM stops the agent with status 0", "\(stopped.map(String.init) ?? "killed")")
            // Started again: the camera was let go.
            let again = try AgentProcess(vigil: vigil, config: configPath, logPath: dir + "/agent-again.log")
            r.check(
                again.waitFor("vigil running", timeout: 30) && again.waitFor("stats", timeout: 30)
                    && again.entries("camera unavailable; waiting for it").isEmpty,
                "stopped and started again, the agent opens the camera at once")
            let second = again.stop()
            r.check(second == 0, "and stops with status 0", "\(second.map(String.init) ?? "killed")")
            for clip in AgentScenarios.savedClips(agent, storage: storage)
                + AgentScenarios.savedClips(restarted, storage: storage)
            {
                expected.append(
                    ClipExpectation(
                        file: clip.file, scenario: "libcamera", width: width, height: height, frameRate: vimcRate,
                        audio: false, changeAfterOnset: nil))
            }
            r.check(expected.count >= 2, "a clip before the unbind and one after", "\(expected.count)")
        } catch {
            r.fail("vigil run: \(error)")
        }
        return expected
    }

    /// The cameras guide's fallback (docs/guide/cameras.md): vigil's V4L2 camera under libcamera's compatibility layer.
    static func libcamerify(_ r: Report, vigil: String, out: String) -> [ClipExpectation] {
        let dir = out + "/libcamerify", storage = dir + "/clips"
        var expected: [ClipExpectation] = []
        do {
            let node = try Vimc.captureNode()
            let configPath = try AgentScenarios.writeConfig(
                in: dir, camera: node, width: width, height: height, fps: 30, audio: nil, storage: storage, preRoll: 1,
                postRoll: 2
            )
            let agent = try AgentProcess(
                vigil: vigil, config: configPath, logPath: dir + "/agent.log", wrapper: ["/usr/bin/libcamerify"])
            let running = agent.waitFor("vigil running", timeout: 30)
            for line in agent.entries("camera negotiated") + agent.entries("cannot open the source") { r.figure(line) }
            r.check(
                running, "libcamerify vigil run opens \(node) through libcamera",
                agent.lines.suffix(3).joined(separator: " | "))
            if running {
                r.check(
                    trigger(vigil, config: configPath, seconds: 2)
                        && agent.waitUntil(timeout: AgentScenarios.eventTimeout) { !movieFiles(in: storage).isEmpty },
                    "vigil trigger starts a clip")
                r.check(
                    agent.waitUntil(timeout: AgentScenarios.eventTimeout) { !journalRecords(in: storage).isEmpty },
                    "the clip is saved")
            }
            let status = agent.stop()
            r.check(status == 0, "SIGTERM stops it with status 0", "\(status.map(String.init) ?? "killed")")
            for clip in AgentScenarios.savedClips(agent, storage: storage) {
                expected.append(
                    ClipExpectation(
                        file: clip.file, scenario: "libcamerify", width: width, height: height, frameRate: vimcRate,
                        audio: false, changeAfterOnset: nil))
            }
        } catch {
            r.fail("libcamerify: \(error)")
        }
        return expected
    }

    /// `vigil trigger --seconds N` on the agent of `config`: whether it took the request.
    static func trigger(_ vigil: String, config: String, seconds: Int) -> Bool {
        (try? Child.run(vigil, ["trigger", "--config", config, "--seconds", String(seconds)]))?.status == 0
    }

    /// This process's resident memory (/proc/self/statm), in bytes.
    static func residentBytes() -> Int {
        let text = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
        let pages = text.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
