import Capture
import Foundation
import Glibc
import H264
import Media
import V4L2

/// The V4L2 memory-to-memory session layer (`M2MSession`, which the hardware H.264 backend
/// runs on) against a real kernel's stateful encoder: `vicodec`, the kernel's virtual codec,
/// built out of tree for the VM's kernel (scripts/vm/build-vicodec.sh; Debian builds neither it
/// nor `v4l2-mem2mem`). vicodec encodes FWHT, not H.264: what is tested is the session — the
/// device found and told apart from cameras and decoders, formats and strides, buffers cycled,
/// every timestamp back on its coded buffer, the H.264 controls reported missing and tolerated,
/// drain and restart, no leak over 10,000 frames, the driver taken away — on the single- and
/// the multi-planar API (the Pi's encoder is multi-planar).
enum CodecScenarios {
    static func run(_ r: Report, vigil: String, out: String) {
        r.section("memory-to-memory encoder session (vicodec)")
        guard let directory = ProcessInfo.processInfo.environment["VIGIL_VICODEC_DIR"], !directory.isEmpty else {
            r.fail("VIGIL_VICODEC_DIR does not name the built vicodec modules (scripts/vm/build-vicodec.sh)")
            return
        }
        let memToMem = directory + "/v4l2-mem2mem.ko", vicodec = directory + "/vicodec.ko"
        let loaded = shell("/sbin/insmod", [memToMem])
        r.check(loaded.status == 0, "v4l2-mem2mem loads", loaded.stderr)
        for multiplanar in [false, true] {
            let api = multiplanar ? "multi-planar" : "single-planar"
            let load = shell("/sbin/insmod", [vicodec, "multiplanar=\(multiplanar ? 1 : 0)"])
            guard r.check(load.status == 0, "vicodec loads (\(api))", load.stderr) else { continue }
            usleep(300_000)
            if !multiplanar { backend(r, vigil: vigil, out: out) }
            session(r, api: api, multiplanar: multiplanar)
            let unload = shell("/sbin/rmmod", ["vicodec"])
            r.check(unload.status == 0, "vicodec unloads (\(api))", unload.stderr)
        }
    }

    /// The backend above the session, with vicodec the only memory-to-memory device: it is
    /// listed for what it is, `auto` records with x264 and says why, and `v4l2` is refused at
    /// start naming what vicodec writes.
    static func backend(_ r: Report, vigil: String, out: String) {
        let nodes = ((try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? [])
            .filter { $0.hasPrefix("video") }.sorted().map { "/dev/" + $0 }
        let devices = M2MSession.devices(among: nodes)
        let encoders = devices.filter { $0.codedFormats.contains("FWHT") }
        r.check(
            !encoders.isEmpty && devices.allSatisfy { $0.driver == "vicodec" },
            "the memory-to-memory devices found are vicodec's, cameras passed over",
            devices.map { "\($0.path): \($0.name) writes \($0.codedFormats)" }.joined(separator: "; "))
        r.check(
            encoders.allSatisfy {
                !$0.encodesH264 && $0.controls.contains { $0.name == "FORCE_KEY_FRAME" && !$0.present }
            },
            "vicodec's encoder is listed as no H.264 encoder, without FORCE_KEY_FRAME")
        if let e = encoders.first {
            r.figure("\(e.path): \(e.name), takes \(e.rawFormats), sizes \(String(describing: e.sizes))")
        }

        let probe = shell(vigil, ["probe"], stdout: true)
        r.check(
            probe.status == 0 && probe.output.contains("Hardware encoders (V4L2 memory-to-memory)")
                && probe.output.contains("writes: FWHT") && probe.output.contains("no — no hardware H.264 encoder"),
            "vigil probe lists vicodec as a hardware encoder that cannot record H.264", probe.output)

        func run(_ backend: String) -> (status: Int32, output: String) {
            let config = out + "/codec-\(backend).conf"
            let text = """
                camera = { device = "synthetic"; width = 320; height = 240; fps = 15.0; };
                storage = { path = "\(out)/codec-\(backend)-clips"; min_free_mb = 1; };
                encoder = { backend = "\(backend)"; };
                """
            try? text.write(toFile: config, atomically: true, encoding: .utf8)
            return shell("/usr/bin/timeout", ["-s", "INT", "20", vigil, "run", "--config", config], stdout: true)
        }
        let required = run("v4l2")
        r.check(
            required.status == 78 && required.output.contains("no hardware H.264 encoder: /dev/")
                && required.output.contains("(vicodec) writes FWHT"),
            "encoder.backend = \"v4l2\" with only vicodec: refused at start (78), naming what vicodec writes",
            "exit \(required.status): \(required.output)")
        let automatic = run("auto")
        r.check(
            automatic.output.contains("msg=\"encoder chosen\" backend=x264")
                && automatic.output.contains("(vicodec) writes FWHT") && automatic.output.contains("encoder=x264"),
            "encoder.backend = \"auto\" with only vicodec: x264 records, and the log says why",
            automatic.output.split(separator: "\n").filter { $0.contains("encod") }.joined(separator: "\n"))
    }

    static func shell(_ program: String, _ arguments: [String], stdout: Bool) -> (status: Int32, output: String) {
        do {
            let result = try Child.run(program, arguments)
            return (result.status, result.stdout + result.stderr)
        } catch {
            return (-1, error.description)
        }
    }

    static func shell(_ program: String, _ arguments: [String]) -> (status: Int32, stderr: String) {
        do {
            let result = try Child.run(program, arguments)
            return (result.status, result.stderr.trimmingCharacters(in: .whitespacesAndNewlines))
        } catch {
            return (-1, error.description)
        }
    }

    static func frames(width: Int, height: Int, pixelFormat: PixelFormat, count: Int) throws -> [VideoFrame] {
        let scene = SyntheticScene(
            width: width, height: height, frameRate: Rational(30, 1), pixelFormat: pixelFormat, seed: 5,
            noiseSigma: 3,
            schedule: SceneSchedule(objects: [
                SceneObject(enter: .zero, leave: .init(seconds: 10), path: .rightToLeft(y: 0.5))
            ]))
        let source = try SyntheticSource(scene: scene)
        var frames: [VideoFrame] = []
        while frames.count < count, let f = try source.nextFrame() { frames.append(f) }
        return frames
    }

    /// The encoder node: of every /dev/video*, the one a session for FWHT opens on. The others
    /// must be refused with a reason: vivid's cameras are not memory-to-memory devices, and
    /// vicodec's decoder does not encode FWHT.
    static func findEncoder(_ r: Report, format: VideoFormat) -> String? {
        let nodes = ((try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? [])
            .filter { $0.hasPrefix("video") }.sorted().map { "/dev/" + $0 }
        var found: String?
        var refusals: [String] = []
        for node in nodes {
            do {
                let session = try M2MSession(path: node, format: format, coded: "FWHT")
                if found == nil { found = node }
                r.figure("\(node): \(session.identity.card) (\(session.identity.driver)) encodes FWHT")
            } catch {
                refusals.append("\(node): \(error.problem)")
            }
        }
        r.check(
            refusals.contains { $0.contains("not a memory-to-memory device") },
            "a camera node is refused as not a memory-to-memory device", refusals.joined(separator: "; "))
        r.check(
            refusals.contains { $0.contains("does not encode FWHT") },
            "vicodec's other nodes are refused, naming what they do encode")
        return found
    }

    static func session(_ r: Report, api: String, multiplanar: Bool) {
        do {
            let format = try VideoFormat(width: 640, height: 480, pixelFormat: .nv12, frameRate: Rational(30, 1))
            guard let node = findEncoder(r, format: format) else {
                r.fail("no vicodec encoder node (\(api))")
                return
            }
            // An H.264 encoder asked of a device that encodes something else: a clear refusal.
            do {
                _ = try M2MSession(path: node, format: format, coded: "H264")
                r.fail("\(node) was taken for an H.264 encoder")
            } catch {
                r.check(
                    error.problem.contains("does not encode H264") && error.problem.contains("FWHT"),
                    "asked for H.264, \(node) is refused naming what it encodes", error.problem)
            }

            for pixelFormat in [PixelFormat.nv12, .i420] {
                let input = try frames(width: 640, height: 480, pixelFormat: pixelFormat, count: 60)
                let session = try M2MSession(path: node, format: input[0].format, coded: "FWHT")
                r.check(session.multiplanar == multiplanar, "\(api) API as loaded (\(pixelFormat))")
                r.figure(
                    "\(pixelFormat) 640×480 (\(api)): planes at \(session.rawLayout.planes.map { "offset \($0.offset) stride \($0.stride)" }.joined(separator: ", ")), \(session.rawLayout.bufferSize) bytes"
                )
                // vicodec has no H.264 controls: reported missing, not an error.
                let forced = try session.setControl(M2MSession.Control.forceKeyFrame, 1, "FORCE_KEY_FRAME")
                let period = try session.setControl(M2MSession.Control.h264IPeriod, 30, "H264_I_PERIOD")
                r.check(!forced && !period, "H.264 controls reported missing and tolerated (\(pixelFormat))")

                var coded: [M2MCodedBuffer] = []
                for frame in input { coded += try session.encode(frame) }
                coded += try session.drain()
                r.check(
                    coded.map(\.timestamp) == input.map(\.timestamp),
                    "\(pixelFormat): every frame's timestamp comes back on its coded buffer, in order",
                    "\(coded.count) coded buffers for \(input.count) frames")
                r.check(coded.allSatisfy { !$0.bytes.isEmpty }, "\(pixelFormat): no coded buffer is empty")
                // Drain, then more frames on the same session.
                try session.restart()
                var again: [M2MCodedBuffer] = []
                let later = input.map {
                    VideoFrame(
                        format: $0.format, buffer: $0.buffer, timestamp: $0.timestamp + .init(seconds: 10),
                        sequence: $0.sequence)
                }
                for frame in later.prefix(30) { again += try session.encode(frame) }
                again += try session.drain()
                r.check(
                    again.map(\.timestamp) == later.prefix(30).map(\.timestamp),
                    "\(pixelFormat): after a drain the session restarts and encodes again", "\(again.count) of 30")
            }

            // No leak: 10,000 frames through one session on the multi-planar API (the Pi's),
            // 2,000 on the single-planar one — about three minutes under emulation for the
            // 10,000. vicodec takes nothing under 640×360.
            let total = multiplanar ? 10_000 : 2_000
            let small = try frames(width: 640, height: 360, pixelFormat: .nv12, count: 30)
            let session = try M2MSession(path: node, format: small[0].format, coded: "FWHT")
            // Freed heap goes back to the system first (`malloc_trim`): what is left resident
            // is what is still in use. (Frame-sized buffers freed and allocated again move
            // glibc's mmap threshold up, and the heap then keeps their pages: megabytes of RSS
            // that are no leak, as a single-planar run once showed.)
            // (malloc.h is not in Swift's Glibc module: the function is looked up.)
            typealias Trim = @convention(c) (Int) -> Int32
            let trim = dlsym(nil, "malloc_trim").map { unsafeBitCast($0, to: Trim.self) }
            func rssKB() -> Int {
                _ = trim?(0)
                let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
                let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
                return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
            }
            func openFiles() -> Int {
                (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
            }
            var count = 0
            var rssAfterWarmUp = 0, filesAfterWarmUp = 0
            for n in 0..<total {
                let f = small[n % small.count]
                let frame = VideoFrame(
                    format: f.format, buffer: f.buffer,
                    timestamp: Timestamp(nanoseconds: 1_000_000_000 + Int64(n) * 33_333_333), sequence: UInt64(n))
                count += try session.encode(frame).count
                if n == 999 {
                    rssAfterWarmUp = rssKB()
                    filesAfterWarmUp = openFiles()
                }
            }
            count += try session.drain().count
            let grown = rssKB() - rssAfterWarmUp
            r.check(count == total, "\(total) frames in, as many coded buffers out (\(api))", "\(count)")
            r.check(
                grown < 2048 && openFiles() == filesAfterWarmUp,
                "no buffer, memory or descriptor leak over frames 1,000 to \(total) (\(api))",
                "RSS grew \(grown) kB, open files \(filesAfterWarmUp) → \(openFiles())")

            // The driver taken away while a session streams. `rmmod` is refused while the
            // session holds the module, and the session goes on.
            let live = try M2MSession(path: node, format: small[0].format, coded: "FWHT")
            _ = try live.encode(small[0])
            let removal = shell("/sbin/rmmod", ["vicodec"])
            r.check(
                removal.status != 0 && removal.stderr.lowercased().contains("in use"),
                "removing vicodec mid-stream is refused while a session holds it (\(api))", removal.stderr)
            for f in small.dropFirst(1).prefix(5) { _ = try live.encode(f) }
            // The device unbound (as a USB codec unplugged): the session fails with an error
            // that says the device is gone — never a crash — and a new session works once the
            // device is back.
            let unbind = "/sys/bus/platform/drivers/vicodec/unbind", bind = "/sys/bus/platform/drivers/vicodec/bind"
            do {
                try "vicodec.0".write(toFile: unbind, atomically: false, encoding: .utf8)
                var failure: V4L2Error?
                do {
                    for f in small.dropFirst(6) { _ = try live.encode(f) }
                    _ = try live.drain()
                } catch {
                    failure = error
                }
                r.check(
                    failure?.problem.contains("the device is gone") == true,
                    "vicodec unbound mid-stream: the session fails saying the device is gone (\(api))",
                    failure?.description ?? "no error")
                try "vicodec.0".write(toFile: bind, atomically: false, encoding: .utf8)
                usleep(300_000)
                // The nodes come back under new numbers (the old session still holds its one).
                guard let back = findEncoder(r, format: small[0].format) else {
                    r.fail("vicodec's encoder did not come back after binding (\(api))")
                    return
                }
                let again = try M2MSession(path: back, format: small[0].format, coded: "FWHT")
                var coded: [M2MCodedBuffer] = []
                for f in small.prefix(10) { coded += try again.encode(f) }
                coded += try again.drain()
                r.check(
                    coded.count == 10, "once the device is back, a new session on \(back) encodes (\(api))",
                    "\(coded.count) of 10")
            } catch {
                r.fail("unbinding and binding vicodec: \(error)")
            }
        } catch {
            r.fail("\(api): \(error)")
        }
    }
}
