import Capture
import Foundation
import Glibc
import H264
import Media

/// The V4L2 memory-to-memory session layer (`M2MSession`, which the hardware H.264 backend
/// runs on) against a real kernel's stateful encoder: `vicodec`, the kernel's virtual codec,
/// built out of tree for the VM's kernel (scripts/vm/build-vicodec.sh; Debian builds neither it
/// nor `v4l2-mem2mem`). vicodec encodes FWHT, not H.264: what is tested is the session — the
/// device found and told apart from cameras and decoders, formats and strides, buffers cycled,
/// every timestamp back on its coded buffer, the H.264 controls reported missing and tolerated,
/// drain and restart, no leak over 10,000 frames, the driver taken away — on the single- and
/// the multi-planar API (the Pi's encoder is multi-planar).
enum CodecScenarios {
    static func run(_ r: Report) {
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
            session(r, api: api, multiplanar: multiplanar)
            let unload = shell("/sbin/rmmod", ["vicodec"])
            r.check(unload.status == 0, "vicodec unloads (\(api))", unload.stderr)
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

            // No leak: 10,000 frames through one session.
            let small = try frames(width: 160, height: 120, pixelFormat: .nv12, count: 30)
            let session = try M2MSession(path: node, format: small[0].format, coded: "FWHT")
            func rssKB() -> Int {
                let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
                let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
                return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
            }
            func openFiles() -> Int {
                (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
            }
            var count = 0
            var rssAfterWarmUp = 0, filesAfterWarmUp = 0
            for n in 0..<10_000 {
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
            r.check(count == 10_000, "10,000 frames in, 10,000 coded buffers out (\(api))", "\(count)")
            r.check(
                grown < 2048 && openFiles() == filesAfterWarmUp,
                "no buffer, memory or descriptor leak over frames 1,000 to 10,000 (\(api))",
                "RSS grew \(grown) kB, open files \(filesAfterWarmUp) → \(openFiles())")

            // The driver taken away while a session streams: refused while in use, or, if it
            // goes, the session fails with an error naming the device — never a crash.
            let live = try M2MSession(path: node, format: small[0].format, coded: "FWHT")
            _ = try live.encode(small[0])
            let removal = shell("/sbin/rmmod", ["vicodec"])
            if removal.status == 0 {
                do {
                    for f in small.dropFirst() { _ = try live.encode(f) }
                    _ = try live.drain()
                    r.fail("vicodec removed mid-stream, and the session went on as if nothing happened")
                } catch {
                    r.check(true, "vicodec removed mid-stream: the session fails with an error", error.description)
                }
                _ = shell(
                    "/sbin/insmod",
                    [
                        ProcessInfo.processInfo.environment["VIGIL_VICODEC_DIR"]! + "/vicodec.ko",
                        "multiplanar=\(multiplanar ? 1 : 0)",
                    ])
            } else {
                r.check(
                    removal.stderr.lowercased().contains("in use"),
                    "removing vicodec mid-stream is refused while a session holds it", removal.stderr)
                for f in small.dropFirst() { _ = try live.encode(f) }
                let rest = try live.drain()
                r.check(!rest.isEmpty, "the session goes on after the refused removal")
            }
        } catch {
            r.fail("\(api): \(error)")
        }
    }
}
