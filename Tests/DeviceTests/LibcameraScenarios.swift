import Capture
import Foundation
import Glibc
import Media
import TestSupport

/// The libcamera source against a real kernel camera: vimc through libcamera's vimc pipeline,
/// the vigil-libcamera plugin built beside the binaries under test.
enum LibcameraScenarios {
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
        unbind(r)
        memory(r)
        var clips = agent(r, vigil: vigil, out: out)
        clips += libcamerify(r, vigil: vigil, out: out)
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
            "vigil probe lists vimc's formats (RGB, converted)", section.split(separator: "\n").prefix(6).joined(separator: " | "))
        let one = (try? Child.run(vigil, ["probe", "libcamera:" + Vimc.cameraID]))
        r.check(
            one?.status == 0 && one?.stdout.contains("device = \"libcamera\";") == true,
            "vigil probe libcamera:ID shows that camera with a block to paste", one?.stderr ?? "")
    }

    /// Frames straight from the source: size, timestamps on the capture clock, the rate, the picture.
    static func direct(_ r: Report) {
        do {
            let opened = MonotonicClock.now()
            let camera = try LibcameraSource(camera: nil, request: CameraRequest(width: 640, height: 480, fps: 30))
            r.figure("640x480 at 30 asked: \(camera.negotiation)")
            r.check(
                camera.format.width == 640 && camera.format.height == 480 && camera.format.pixelFormat == .i420,
                "640x480 is delivered as I420", "\(camera.format)")
            try Vimc.setPattern(.white)
            var frames = try takeFrames(camera, count: 90)
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
            frames = try takeFrames(camera, count: 30)
            let black = frames.suffix(10).map(\.luma).reduce(0, +) / 10
            r.figure("mean luma: white pattern \(fixed(white, 1)), black \(fixed(black, 1))")
            r.check(white > 200 && black < 40, "the picture is the sensor's (RGB converted to I420)")
            try Vimc.setPattern(.colorbar75)
        } catch {
            r.fail("640x480: \(error)")
        }
        do {
            let camera = try LibcameraSource(camera: Vimc.cameraID, request: CameraRequest(width: 643, height: 481, fps: 30))
            let frames = try takeFrames(camera, count: 10)
            r.figure("643x481 asked: \(camera.negotiation)")
            r.check(
                (camera.format.width, camera.format.height) != (643, 481) && camera.format.width == camera.negotiation.width
                    && camera.format.height == camera.negotiation.height && frames.count == 10,
                "a size vimc cannot make is rounded, and frames come at the rounded size",
                "\(camera.format.width)x\(camera.format.height)")
        } catch {
            r.fail("643x481: \(error)")
        }
    }

    /// vimc unbound while streaming: the source says the camera is gone; opening fails while it is;
    /// bound again, it opens and streams.
    static func unbind(_ r: Report) {
        do {
            let camera = try LibcameraSource(camera: nil, request: CameraRequest(width: 640, height: 480, fps: 30))
            _ = try takeFrames(camera, count: 5)
            let pulled = MonotonicClock.now()
            try Vimc.unbind()
            do {
                _ = try takeFrames(camera, count: 500)
                r.fail("frames went on after vimc was unbound")
            } catch {
                r.figure("unbound while streaming: \(error) (after \(fixed((MonotonicClock.now() - pulled).seconds, 2)) s)")
                let lost: Bool
                switch error {
                case .deviceLost, .stalled: lost = true
                default: lost = false
                }
                r.check(lost, "unbinding while streaming ends the stream as a lost camera (the agent retries)")
            }
            try Vimc.waitForCamera(present: false)
            do {
                _ = try LibcameraSource(camera: nil, request: CameraRequest(width: 640, height: 480, fps: 30))
                r.fail("the camera opened while unbound")
            } catch {
                r.figure("opening while unbound: \(error)")
                r.check(error.description.contains("libcamera finds no camera"), "opening while unbound says there is no camera")
            }
            try Vimc.bind()
            try Vimc.waitForCamera(present: true)
            let back = try LibcameraSource(camera: nil, request: CameraRequest(width: 640, height: 480, fps: 30))
            r.check(try takeFrames(back, count: 10).count == 10, "bound again, the camera opens and streams")
        } catch {
            r.fail("unbind: \(error)")
        }
    }

    /// Frames through the source with the memory of the process measured: it must stay flat.
    static func memory(_ r: Report) {
        let count = Int(ProcessInfo.processInfo.environment["VIGIL_LIBCAMERA_FRAMES"] ?? "") ?? 10_000
        do {
            let camera = try LibcameraSource(camera: nil, request: CameraRequest(width: 320, height: 240, fps: 30))
            _ = try takeFrames(camera, count: 300)
            let before = residentBytes()
            let start = MonotonicClock.now()
            var taken = 0
            while taken < count {
                guard try camera.nextFrame() != nil else { break }
                taken += 1
            }
            let after = residentBytes()
            r.figure(
                "\(taken) frames of 320x240 in \(fixed((MonotonicClock.now() - start).seconds, 1)) s; resident \(before >> 10) KiB before, \(after >> 10) KiB after"
            )
            r.check(
                taken == count && after - before < 2 << 20, "\(count) frames with the resident memory flat (under 2 MiB more)",
                "\((after - before) >> 10) KiB more")
        } catch {
            r.fail("memory: \(error)")
        }
    }

    /// `vigil run` on `camera.device = "libcamera"`: clips, then vimc unbound while recording and
    /// bound again, then stopped and started again.
    static func agent(_ r: Report, vigil: String, out: String) -> [ClipExpectation] {
        let dir = out + "/libcamera", storage = dir + "/clips"
        var expected: [ClipExpectation] = []
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let configPath = dir + "/vigil.conf"
            try AgentScenarios.config(
                camera: "libcamera", width: 640, height: 480, fps: 30, audio: nil, storage: storage, preRoll: 1,
                postRoll: 2
            )
            .write(toFile: configPath, atomically: true, encoding: .utf8)
            let agent = try AgentProcess(vigil: vigil, config: configPath, logPath: dir + "/agent.log")
            r.check(agent.waitFor("vigil running", timeout: 30), "vigil run starts on camera.device = \"libcamera\"")
            for line in agent.entries("source open") { r.figure(line) }
            var flicker = PatternFlicker()
            r.check(agent.waitFor("clip started", timeout: AgentScenarios.eventTimeout), "motion starts a clip")
            Thread.sleep(forTimeInterval: 1)
            try Vimc.unbind()
            r.check(
                agent.waitFor("camera lost; closing the clip and retrying", timeout: AgentScenarios.eventTimeout),
                "vimc unbound while recording: the agent says the camera is lost and retries")
            r.check(agent.waitFor("clip saved", timeout: AgentScenarios.eventTimeout), "and saves the open clip")
            flicker.stop()
            for line in agent.entries("camera lost; closing the clip and retrying") { r.figure(line) }
            Thread.sleep(forTimeInterval: 3)  // retries meanwhile
            try Vimc.bind()
            r.check(agent.waitFor("camera back", timeout: 60), "bound again: the camera is back")
            flicker = PatternFlicker()
            r.check(
                agent.waitFor("clip started", count: 2, timeout: AgentScenarios.eventTimeout),
                "recording resumes: motion starts a new clip")
            Thread.sleep(forTimeInterval: 1.5)
            flicker.stop()
            r.check(
                agent.waitFor("clip saved", count: 2, timeout: AgentScenarios.eventTimeout), "the clip is saved")
            let status = agent.stop()
            r.check(status == 0, "SIGTERM stops the agent with status 0", "\(status.map(String.init) ?? "killed")")
            // Started again: the camera was let go.
            let again = try AgentProcess(vigil: vigil, config: configPath, logPath: dir + "/agent-again.log")
            r.check(
                again.waitFor("vigil running", timeout: 30) && again.waitFor("stats", timeout: 30)
                    && again.entries("camera unavailable; waiting for it").isEmpty,
                "stopped and started again, the agent opens the camera at once")
            let second = again.stop()
            r.check(second == 0, "and stops with status 0", "\(second.map(String.init) ?? "killed")")
            for clip in AgentScenarios.savedClips(agent, storage: storage) {
                expected.append(
                    ClipExpectation(
                        file: clip.file, scenario: "libcamera", width: 640, height: 480, frameRate: vimcRate,
                        audio: false, changeAfterOnset: nil))
            }
            r.check(expected.count >= 2, "a clip before the unbind and one after", "\(expected.count)")
        } catch {
            r.fail("vigil run: \(error)")
        }
        return expected
    }

    /// The README's fallback: vigil's V4L2 camera under libcamera's compatibility layer.
    static func libcamerify(_ r: Report, vigil: String, out: String) -> [ClipExpectation] {
        let dir = out + "/libcamerify", storage = dir + "/clips"
        var expected: [ClipExpectation] = []
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let node = try Vimc.captureNode()
            let configPath = dir + "/vigil.conf"
            try AgentScenarios.config(
                camera: node, width: 640, height: 480, fps: 30, audio: nil, storage: storage, preRoll: 1, postRoll: 2
            )
            .write(toFile: configPath, atomically: true, encoding: .utf8)
            let agent = try AgentProcess(
                vigil: vigil, config: configPath, logPath: dir + "/agent.log", wrapper: ["/usr/bin/libcamerify"])
            let running = agent.waitFor("vigil running", timeout: 30)
            for line in agent.entries("camera negotiated") + agent.entries("cannot open the source") { r.figure(line) }
            r.check(running, "libcamerify vigil run opens \(node) through libcamera", agent.lines.suffix(3).joined(separator: " | "))
            if running {
                let flicker = PatternFlicker()
                r.check(agent.waitFor("clip started", timeout: AgentScenarios.eventTimeout), "motion starts a clip")
                Thread.sleep(forTimeInterval: 1.5)
                flicker.stop()
                r.check(agent.waitFor("clip saved", timeout: AgentScenarios.eventTimeout), "the clip is saved")
            }
            let status = agent.stop()
            r.check(status == 0, "SIGTERM stops it with status 0", "\(status.map(String.init) ?? "killed")")
            for clip in AgentScenarios.savedClips(agent, storage: storage) {
                expected.append(
                    ClipExpectation(
                        file: clip.file, scenario: "libcamerify", width: 640, height: 480, frameRate: vimcRate,
                        audio: false, changeAfterOnset: nil))
            }
        } catch {
            r.fail("libcamerify: \(error)")
        }
        return expected
    }

    /// Takes `count` frames, dropping each at once.
    static func takeFrames(_ source: any FrameSource, count: Int) throws(CaptureError) -> [Seen] {
        var seen: [Seen] = []
        for _ in 0..<count {
            guard let frame = try source.nextFrame() else { break }
            seen.append(
                Seen(
                    timestamp: frame.timestamp, dequeued: MonotonicClock.now(), sequence: frame.sequence,
                    luma: meanLuma(frame)))
        }
        return seen
    }

    /// This process's resident memory (/proc/self/statm), in bytes.
    static func residentBytes() -> Int {
        let text = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
        let pages = text.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
