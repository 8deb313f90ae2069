import Capture
import Foundation
import Media
import POSIX

/// One frame as a test looks at it: when it was captured and taken, its number, its brightness.
struct Seen {
    var timestamp: Timestamp
    var dequeued: Timestamp
    var sequence: UInt64
    var luma: Double
}

/// The mean of the middle rows of the luma plane (or of YUYV's Y bytes).
func meanLuma(_ frame: VideoFrame) -> Double {
    let plane = frame.plane(0)
    let step = frame.format.pixelFormat == .yuyv ? 2 : 1
    var sum = 0, count = 0
    for y in stride(from: plane.height / 4, to: plane.height * 3 / 4, by: 8) {
        let row = plane.row(y)
        for x in stride(from: 0, to: row.count, by: 8 * step) {
            sum += Int(row[x])
            count += 1
        }
    }
    return count == 0 ? 0 : Double(sum) / Double(count)
}

/// Takes `count` frames from a camera (V4L2 or libcamera), dropping each at once (the driver
/// never runs short of buffers).
func take(_ camera: any FrameSource, count: Int) throws(CaptureError) -> [Seen] {
    var seen: [Seen] = []
    for _ in 0..<count {
        guard let frame = try camera.nextFrame() else { break }
        seen.append(
            Seen(
                timestamp: frame.timestamp, dequeued: Clock.monotonic.now(), sequence: frame.sequence,
                luma: meanLuma(frame)))
    }
    return seen
}

/// Takes five frames from `camera`, then `pull`s it (unplugs or unbinds its device) while it
/// streams: taking `upTo` more must fail as `judge` says (`Report.expectError`), the figure
/// (`figure`: the error) saying how long after the pull, to `places` decimals.
func pullWhileStreaming(
    _ camera: any FrameSource, _ r: Report, pull: () throws -> Void, upTo frames: Int, _ what: String, label: String,
    ifNoError: String, figure: String, places: Int, judge: (CaptureError) -> Bool?
) throws {
    _ = try take(camera, count: 5)
    let pulled = Clock.monotonic.now()
    try pull()
    r.expectError(
        what, label: label, ifNoError: ifNoError,
        figure: { "\(figure): \($0) (after \(fixed((Clock.monotonic.now() - pulled).seconds, places)) s)" },
        judge: judge
    ) { () throws(CaptureError) in _ = try take(camera, count: frames) }
}

/// How many frames the timestamps say are missing between consecutive frames, against what
/// the sequence numbers say: both must agree if lost frames are counted right.
///
/// vivid's stamps wobble by a few ms under emulation, and a starved vivid (a busy host,
/// `DEVICE_TESTS_STRESS=1`) stamps a frame far enough off that the camera's timeline snaps it
/// to the neighbouring tick or restarts its grid there: one interval then rounds to a frame
/// more or less. So a gap counted one frame apart is a wobble; `miscounted` are the gaps the
/// two count more than one frame apart.
func gapCounts(
    _ frames: [Seen], period: Double
) -> (
    bySequence: Int, byTimestamp: Int, disagreements: Int, miscounted: Int
) {
    var bySequence = 0, byTimestamp = 0, disagreements = 0, miscounted = 0
    for (a, b) in zip(frames, frames.dropFirst()) {
        let s = Int(b.sequence - a.sequence) - 1
        let t = Int(((b.timestamp - a.timestamp).seconds / period).rounded()) - 1
        bySequence += s
        byTimestamp += t
        if s != t { disagreements += 1 }
        if abs(s - t) > 1 { miscounted += 1 }
    }
    return (bySequence, byTimestamp, disagreements, miscounted)
}

func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

enum CameraScenarios {
    /// The modes vivid's webcam input offers: asked for, negotiated, and delivered.
    static func negotiation(_ r: Report) {
        r.section("V4L2 negotiation at 640x480 and 1280x720 (vivid webcam input)")
        do {
            try Vivid.reset()
            try Vivid.makeByIdLink()
        } catch {
            r.fail("\(error)")
            return
        }
        let cases: [(Int, Int, Double, Rational)] = [
            (640, 480, 25, Rational(25, 1)), (640, 480, 30, Rational(25, 1)),
            (1280, 720, 12.5, Rational(25, 2)), (1280, 720, 30, Rational(25, 2)),
        ]
        for (width, height, fps, expected) in cases {
            let request = CameraRequest(width: width, height: height, fps: fps)
            let camera: V4L2Camera
            do { camera = try V4L2Camera(path: Vivid.byIdLink, request: request) } catch {
                r.fail("open \(Vivid.byIdLink) for \(width)x\(height) at \(fps) fps: \(error)")
                continue
            }
            let n = camera.negotiation
            r.figure(
                "asked \(width)x\(height) at \(DecimalText.rate(request.frameRate)) fps -> \(n); format \(camera.format)"
            )
            r.check(
                n.fourcc == .nv12 && !n.isEmulated, "\(width)x\(height)@\(fps): native NV12 preferred", "\(n.fourcc)")
            r.check(
                n.width == width && n.height == height, "\(width)x\(height)@\(fps): size as asked",
                "\(n.width)x\(n.height)")
            r.check(
                n.frameRate == expected,
                "\(width)x\(height)@\(fps): rate set by S_PARM is vivid's \(DecimalText.rate(expected))",
                "\(n.frameRate.map(DecimalText.rate) ?? "none")")
            r.check(n.rateIsSettable, "\(width)x\(height)@\(fps): V4L2_CAP_TIMEPERFRAME reported")
            r.check(
                n.buffers >= 2 && camera.format.planes[0].stride == n.bytesPerLine
                    && camera.format.planes[1].stride == n.bytesPerLine,
                "\(width)x\(height)@\(fps): strides taken from bytesperline",
                "\(camera.format.planes.map(\.stride)), bytesperline \(n.bytesPerLine)")
            let seconds = 2.0
            let frames: [Seen]
            do { frames = try take(camera, count: Int(seconds * expected.doubleValue) + 1) } catch {
                r.fail("\(width)x\(height)@\(fps): streaming: \(error)")
                continue
            }
            guard let first = frames.first, let last = frames.last, frames.count > 2 else {
                r.fail("\(width)x\(height)@\(fps): too few frames")
                continue
            }
            let period = 1 / expected.doubleValue
            let intervals = zip(frames, frames.dropFirst()).map {
                ($1.timestamp - $0.timestamp).seconds / Double($1.sequence - $0.sequence)
            }
            let delivered = Double(last.sequence - first.sequence) / (last.timestamp - first.timestamp).seconds
            let gaps = gapCounts(frames, period: period)
            let lateness = frames.map { ($0.dequeued - $0.timestamp).seconds }
            r.figure(
                "delivered \(frames.count) frames: \(fixed(delivered, 2)) fps by the timestamps, median interval \(fixed(median(intervals) * 1000, 1)) ms, "
                    + "\(gaps.bySequence) lost, taken \(fixed(median(lateness) * 1000, 1)) ms (median) after the timestamp, \(camera.timelineRestarts) grid restarts"
            )
            r.check(
                abs(delivered / expected.doubleValue - 1) < 0.02,
                "\(width)x\(height)@\(fps): the driver delivers the negotiated rate", "\(fixed(delivered, 2)) fps")
            // vivid stamps the end of the frame interval (V4L2_BUF_FLAG_TSTAMP_SRC_EOF) and hands
            // the frame out at its start: up to a frame ahead of the clock. Any other clock would be
            // off by far more.
            r.check(
                lateness.allSatisfy { $0 > -2 * period && $0 < 5.0 },
                "\(width)x\(height)@\(fps): timestamps are on CLOCK_MONOTONIC (each within a frame of it, or late by scheduling)",
                "lateness \(fixed(lateness.min() ?? 0, 4))...\(fixed(lateness.max() ?? 0, 4)) s")
            // vivid's end-of-frame stamps wobble under emulation, so a single gap may round a
            // frame differently (`gapCounts`); no gap may be counted further apart.
            r.timingCheck(
                gaps.miscounted == 0,
                "\(width)x\(height)@\(fps): sequence numbers and timestamps count the same frames missing (each gap within a frame)",
                "\(gaps)")
        }
        // A node that is not a camera, and one that is not there.
        do {
            _ = try V4L2Camera(path: "/dev/video1", request: CameraRequest(width: 640, height: 480, fps: 25))
            r.fail("/dev/video1 (vivid's video output) opened as a camera")
        } catch {
            r.check(
                error.description.contains("video output device"), "a video output node is refused, saying what it is",
                error.description)
        }
    }

    /// Padded strides from a real driver (vivid honours a larger `bytesperline`) in every
    /// format Vigil takes: the same test pattern row must come out of each.
    static func strides(_ r: Report) {
        r.section("bytesperline: padded strides in NV12, YU12, YUYV and 422P")
        do { try Vivid.reset() } catch {
            r.fail("\(error)")
            return
        }
        func row(_ format: FourCC, bytesPerLine: Int?) throws(CaptureError) -> (CameraNegotiation, VideoFormat, [UInt8])
        {
            let camera = try V4L2Camera(
                path: Vivid.node,
                request: CameraRequest(
                    width: 640, height: 480, fps: 25, allowedFormats: [format], bytesPerLine: bytesPerLine))
            var frame: VideoFrame?
            for _ in 0..<3 { frame = try camera.nextFrame() }  // past any start-up frame
            guard let frame else { throw CaptureError.readFailed(source: Vivid.node, frame: 0, reason: "no frame") }
            let plane = frame.plane(0)
            let y = Array(plane.row(plane.height / 2))
            let luma = frame.format.pixelFormat == .yuyv ? stride(from: 0, to: y.count, by: 2).map { y[$0] } : y
            return (camera.negotiation, frame.format, luma)
        }
        let reference: [UInt8]
        do { reference = try row(.nv12, bytesPerLine: nil).2 } catch {
            r.fail("NV12 reference: \(error)")
            return
        }
        for (format, padded) in [(FourCC.nv12, 704), (.yuv420, 704), (.yuyv, 1408), (.yuv422p, 768)] {
            do {
                let (n, layout, luma) = try row(format, bytesPerLine: padded)
                r.figure(
                    "\(format) asked bytesperline \(padded): got \(n.bytesPerLine), plane strides \(layout.planes.map(\.stride)), offsets \(layout.planes.map(\.offset)), sizeimage \(n.sizeImage)"
                )
                r.check(
                    n.fourcc == format && n.bytesPerLine == padded, "\(format): the driver took the padded stride",
                    "\(n.fourcc) \(n.bytesPerLine)")
                let difference = zip(luma, reference).map { abs(Int($0) - Int($1)) }.reduce(0, +) / max(1, luma.count)
                r.check(
                    luma.count == reference.count && difference <= 2,
                    "\(format): the picture row read through the stride matches NV12's", "mean difference \(difference)"
                )
            } catch {
                r.fail("\(format) with bytesperline \(padded): \(error)")
            }
        }
    }

    /// vivid as `Vivid.reset()` leaves it, opened at 640x480 and 25 fps through its node, or
    /// through the /dev/v4l/by-id link (`byId`, made first).
    static func openVivid(byId: Bool = false, stallTimeout: Timestamp.Duration? = nil) throws -> V4L2Camera {
        try Vivid.reset()
        if byId { try Vivid.makeByIdLink() }
        return try V4L2Camera(
            path: byId ? Vivid.byIdLink : Vivid.node, request: CameraRequest(width: 640, height: 480, fps: 25),
            stallTimeout: stallTimeout)
    }

    /// Frames the driver had to drop show as gaps in `sequence`, counted exactly.
    static func lostFrames(_ r: Report) {
        r.section("lost frames: counted from sequence gaps")
        do {
            let camera = try openVivid()
            _ = try take(camera, count: 5)
            // Hold every buffer for a second: the driver has nowhere to put frames.
            var held: [VideoFrame] = []
            var seen: [Seen] = []
            var before = camera.lostFrames
            while held.count < camera.negotiation.buffers {
                guard let frame = try camera.nextFrame() else { break }
                held.append(frame)
                seen.append(
                    Seen(
                        timestamp: frame.timestamp, dequeued: Clock.monotonic.now(), sequence: frame.sequence, luma: 0))
                // Counted from the first frame seen, as the gaps below are (a starved driver may
                // lose a frame while the buffers are being taken, too).
                if seen.count == 1 { before = camera.lostFrames }
            }
            let sleepStart = Clock.monotonic.now()
            Thread.sleep(forTimeInterval: 1.0)
            held.removeAll()
            // A starved VM oversleeps: the frames lost are those of the time really slept.
            let slept = (Clock.monotonic.now() - sleepStart).seconds
            seen += try take(camera, count: 10)
            let lost = camera.lostFrames - before
            let gaps = gapCounts(seen, period: 0.04)
            r.figure(
                "held all \(camera.negotiation.buffers) buffers for \(fixed(slept, 2)) s: \(lost) frames lost (sequence), \(gaps.byTimestamp) missing by timestamps"
            )
            // No upper bound: a starved vivid loses frames of its own besides (the exact count is
            // the next check's).
            r.check(
                lost >= 15, "the frames of the time held (25 a second) are lost while the buffers are held", "\(lost)")
            r.check(gaps.bySequence == lost, "sequence gaps count the frames lost", "\(gaps.bySequence) of \(lost)")
            r.timingCheck(
                gaps.miscounted == 0,
                "sequence gaps and timestamps count the same frames missing (each gap within a frame)",
                "\(gaps)")

            // vivid drops a share of its buffers itself.
            try Vivid.set("percentage_of_dropped_buffers", 40)
            let start = camera.lostFrames
            let frames = try take(camera, count: 40)
            try Vivid.set("percentage_of_dropped_buffers", 0)
            let dropped = camera.lostFrames - start
            let produced = Int(frames.last.map { $0.sequence - (frames.first?.sequence ?? 0) } ?? 0) + 1
            let byDriver = gapCounts(frames, period: 0.04)
            r.figure("percentage_of_dropped_buffers=40: \(dropped) of \(produced) frames lost")
            // At least the share vivid drops (less a margin for chance); a starved vivid loses
            // more of its own, so no upper bound.
            r.check(
                Double(dropped) / Double(produced) > 0.2, "vivid's dropped buffers are counted",
                "\(dropped)/\(produced)")
            r.check(byDriver.bySequence > 0, "they are gaps in the sequence numbers", "\(byDriver.bySequence)")
            r.timingCheck(
                byDriver.miscounted == 0, "every one of them is a gap in the timestamps too (each gap within a frame)",
                "\(byDriver)")

            // A buffer the driver flags as corrupt is skipped, and counts as lost.
            let corruptBefore = camera.corruptFrames
            try Vivid.set("inject_v4l2_buf_flag_error", 1)
            let after = try take(camera, count: 10)
            r.check(
                camera.corruptFrames == corruptBefore + 1, "a buffer with V4L2_BUF_FLAG_ERROR is skipped",
                "\(camera.corruptFrames - corruptBefore)")
            r.check(
                gapCounts(after, period: 0.04).bySequence >= 1 || camera.corruptFrames > corruptBefore,
                "and shows as a gap")
        } catch {
            r.fail("\(error)")
        }
    }

    /// The camera goes away while streaming, fails to open while gone, and works when back.
    static func unplug(_ r: Report) {
        r.section("unplug, broken and stalled streams")
        do {
            let camera = try openVivid(byId: true)
            try pullWhileStreaming(
                camera, r, pull: { try Vivid.unplug() }, upTo: 50,
                "an unplug while streaming throws deviceLost (POLLERR/POLLHUP, not the stall timeout)",
                label: "an unplug", ifNoError: "frames went on after the unplug", figure: "unplugged while streaming",
                places: 3, judge: { if case .deviceLost = $0 { true } else { nil } })
            do {
                _ = try V4L2Camera(path: Vivid.byIdLink, request: CameraRequest(width: 640, height: 480, fps: 25))
                r.fail("the camera opened while unplugged")
            } catch {
                r.figure("opening while unplugged: \(error)")
                r.check(
                    error.description.contains("is the camera plugged in?")
                        || error.description.contains("the device is gone"),
                    "opening an unplugged camera says what to do", error.description)
            }
            try Vivid.replug()
            let back = try V4L2Camera(path: Vivid.byIdLink, request: CameraRequest(width: 640, height: 480, fps: 25))
            let frames = try take(back, count: 10)
            r.check(frames.count == 10, "after the replug the same name opens and streams", "\(back.negotiation)")

            // A driver that breaks the stream (vb2 queue error): POLLERR.
            try Vivid.set("inject_fatal_streaming_error", 1)
            r.expectError(
                "a broken stream throws deviceLost", label: "a broken stream",
                ifNoError: "frames went on after a fatal streaming error", figure: { "fatal streaming error: \($0)" },
                judge: { if case .deviceLost = $0 { true } else { nil } }
            ) { () throws(CaptureError) in _ = try take(back, count: 50) }
        } catch {
            r.fail("\(error)")
        }
        do {
            // A stream that stops delivering: vivid drops every buffer.
            let camera = try openVivid(stallTimeout: .init(seconds: 1))
            _ = try take(camera, count: 5)
            try Vivid.set("percentage_of_dropped_buffers", 100)
            let start = Clock.monotonic.now()
            r.expectError(
                "a stalled stream throws stalled after the timeout, never blocks", label: "a stalled stream",
                ifNoError: "frames came while vivid dropped them all",
                figure: { error in
                    let waited = (Clock.monotonic.now() - start).seconds
                    return "stalled stream: \(error) (after \(fixed(waited, 2)) s, stall timeout 1 s)"
                },
                judge: { if case .stalled = $0 { true } else { nil } }
            ) { () throws(CaptureError) in _ = try take(camera, count: 50) }
            try Vivid.set("percentage_of_dropped_buffers", 0)
        } catch {
            r.fail("\(error)")
        }
    }

    /// How long after a control changes the picture the first changed frame is stamped:
    /// the reference for the audio/video alignment check in a clip.
    static func pictureLatency(_ r: Report) -> [Double] {
        r.section("vivid: time from a pattern change to the first frame showing it")
        var latencies: [Double] = []
        do {
            let camera = try openVivid()
            let pattern = try Vivid.Control("test_pattern")
            _ = try take(camera, count: 3)
            for round in 0..<8 {
                // Change at a different point of the frame period each time.
                _ = try take(camera, count: 1)
                usleep(UInt32(5000 * round))
                let before = Clock.monotonic.now()
                try pattern.set(Vivid.Pattern.white.rawValue)
                let after = Clock.monotonic.now()
                let changed = before + .init(nanoseconds: (after - before).nanoseconds / 2)
                var latency: Double?
                for _ in 0..<10 {
                    guard let frame = try camera.nextFrame() else { break }
                    if meanLuma(frame) > 200 {
                        latency = (frame.timestamp - changed).seconds
                        break
                    }
                }
                guard let latency else {
                    r.fail("round \(round): no white frame within 10 frames")
                    continue
                }
                latencies.append(latency)
                try pattern.set(Vivid.Pattern.colorbar75.rawValue)
                for _ in 0..<10 {
                    guard let frame = try camera.nextFrame() else { break }
                    if meanLuma(frame) < 200 { break }
                }
            }
        } catch {
            r.fail("\(error)")
        }
        r.figure(
            "latency of a pattern change: \(latencies.map { fixed($0 * 1000, 1) }.joined(separator: ", ")) ms; median \(fixed(median(latencies) * 1000, 1)) ms"
        )
        r.check(latencies.count >= 4, "the change was seen in most rounds", "\(latencies.count) of 8")
        return latencies
    }
}
