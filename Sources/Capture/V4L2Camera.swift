internal import CV4L2
internal import Glibc
import Media
internal import POSIX
import Synchronization
import V4L2

/// What a camera agreed to, against what was asked.
public struct CameraNegotiation: Hashable, Sendable, CustomStringConvertible {
    public var device: VideoDeviceIdentity
    public var request: CameraRequest
    /// The mode picked from the driver's lists.
    public var choice: CameraFormatChoice
    /// The pixel format the driver confirmed (G_FMT), and whether libv4l2 converts to it.
    public var fourcc: FourCC
    public var isEmulated: Bool
    public var width: Int
    public var height: Int
    public var bytesPerLine: Int
    public var sizeImage: Int
    /// The rate the driver reports after S_PARM (or its own when it cannot be set).
    public var frameRate: Rational?
    /// Whether the driver takes a frame rate (V4L2_CAP_TIMEPERFRAME).
    public var rateIsSettable: Bool
    /// Buffers the driver granted (VIDIOC_REQBUFS may give fewer or more than asked).
    public var buffers: Int

    /// Whether the camera delivers the requested size and (within half a percent) rate.
    public var matchesRequest: Bool {
        guard width == request.width, height == request.height else { return false }
        guard let frameRate else { return true }
        return CameraFormatChooser.reaches(Rational(frameRate.denominator, frameRate.numerator), request.frameRate)
            && frameRate.doubleValue <= request.frameRate.doubleValue * (1 + CameraFormatChooser.rateTolerance)
    }

    public var description: String {
        var text = "\(fourcc)\(isEmulated ? " converted by libv4l2" : "") \(width)x\(height) stride \(bytesPerLine)"
        text += frameRate.map { " at \(DecimalText.rate($0)) fps" } ?? " at the driver's rate"
        text += rateIsSettable ? "" : " (rate not settable)"
        return text + ", \(buffers) buffers"
    }
}

/// A V4L2 camera: negotiates a format, streams through memory-mapped buffers, and hands out
/// frames whose bytes are the driver's buffers (no copy), timestamped by the driver on the
/// monotonic clock and put on the grid of the negotiated rate (`FrameTimeline`).
///
/// Each frame's buffer goes back to the driver (VIDIOC_QBUF) when the last copy of the frame
/// is dropped. If the pipeline holds every buffer, the driver drops frames, which shows as a
/// gap in `sequence` — the drop policy at the source. `nextFrame()` never waits longer than
/// the stall timeout: an unplugged camera (ENODEV, POLLERR/POLLHUP), an I/O error or a stream
/// that stops delivering throws `CaptureError.deviceLost`/`.stalled`, and the caller opens
/// the camera again later.
public final class V4L2Camera: FrameSource {
    public let name: String
    public let format: VideoFormat
    public let negotiation: CameraNegotiation
    /// Buffers the driver flagged as corrupt (V4L2_BUF_FLAG_ERROR) or returned short; they are
    /// skipped, so they count as lost frames too.
    public private(set) var corruptFrames = 0
    /// Frames lost so far: gaps in the driver's sequence numbers.
    public var lostFrames: Int { sequence.lost }
    /// Times a frame was too far from the nominal rate's grid and the grid started again
    /// (a camera running off its nominal rate does this now and then).
    public var timelineRestarts: Int { timeline?.restarts ?? 0 }
    /// How long `nextFrame()` waits for a frame before it gives up on the stream.
    public let stallTimeout: Timestamp.Duration
    /// The same for the first frame (sensors take a moment to start).
    public let firstFrameTimeout: Timestamp.Duration

    /// Nil once streaming failed: the device then closes as soon as the last frame still out
    /// is dropped, even while this object lives on (a replugged camera gets its node back).
    var stream: V4L2Stream?
    private var sequence = SequenceCounter()
    private var timeline: FrameTimeline?
    private(set) var delivered = 0

    /// Opens `path` (a /dev/video* node or a /dev/v4l/by-id/ link), picks the mode closest to
    /// `request`, and starts streaming with `bufferCount` buffers if the driver grants them.
    public init(
        path: String, request: CameraRequest, bufferCount: Int = 6, stallTimeout: Timestamp.Duration? = nil
    ) throws(CaptureError) {
        name = path
        let device: V4L2Device
        do { device = try V4L2Device(path: path) } catch { throw error.openError() }
        do {
            let identity = try device.identity()
            guard identity.capabilities.isCamera else {
                throw CaptureError.unsupported(
                    source: path,
                    problem:
                        "this is \(identity.capabilities.kind) (\(identity.card), driver \(identity.driver)), not a camera; `vigil probe` lists the cameras there are"
                )
            }
            let formats = try device.formats()
            guard var choice = CameraFormatChooser.choose(from: formats, for: request) else {
                let offered = formats.map { $0.fourcc.description }.joined(separator: ", ")
                throw CaptureError.unsupported(
                    source: path,
                    problem:
                        "the camera offers no format Vigil can record (NV12, YU12, YUYV, 422P, or MJPEG through libv4l2); it offers \(offered.isEmpty ? "none" : offered)"
                )
            }
            // Rates at exactly this size (a stepwise size listed them at its largest).
            let atSize = try device.intervals(of: choice.fourcc, width: choice.width, height: choice.height)
            if atSize != .unknown {
                choice.interval = CameraFormatChooser.chooseInterval(atSize, for: request.frameRate)
            }

            let pix = try V4L2Camera.setFormat(device, choice, bytesPerLine: request.bytesPerLine)
            guard let pixelFormat = FourCC(littleEndian: pix.pixelformat).pixelFormat else {
                throw CaptureError.unsupported(
                    source: path,
                    problem:
                        "the driver switched to pixel format \(FourCC(littleEndian: pix.pixelformat)), which Vigil cannot record"
                )
            }
            let fieldOrder = try V4L2Camera.fieldOrder(pix.field, source: path)
            let (rate, settable) = try V4L2Camera.setRate(
                device,
                interval: choice.interval ?? Rational(request.frameRate.denominator, request.frameRate.numerator))
            let aspect = V4L2Camera.pixelAspect(device)
            let format: VideoFormat
            do {
                format = try VideoFormat(
                    width: Int(pix.width), height: Int(pix.height), pixelFormat: pixelFormat,
                    bytesPerLine: Int(pix.bytesperline),
                    frameRate: rate ?? choice.frameRate, pixelAspectRatio: aspect, fieldOrder: fieldOrder)
            } catch {
                throw CaptureError.unsupported(
                    source: path,
                    problem:
                        "the driver's format \(FourCC(littleEndian: pix.pixelformat)) \(pix.width)x\(pix.height) with \(pix.bytesperline) bytes per line is unusable: \(error.problem)"
                )
            }
            if pix.sizeimage > 0 && Int(pix.sizeimage) < format.bufferSize {
                throw CaptureError.unsupported(
                    source: path,
                    problem:
                        "the driver's buffers of \(pix.sizeimage) bytes are smaller than \(format) needs (\(format.bufferSize) bytes)"
                )
            }
            let stream = try V4L2Stream(device: device, count: bufferCount)
            guard let smallest = stream.buffers.mappings.map(\.length).min(), smallest >= format.bufferSize else {
                throw CaptureError.unsupported(
                    source: path,
                    problem: "the driver's mapped buffers are smaller than \(format) needs (\(format.bufferSize) bytes)"
                )
            }
            try stream.start()
            self.stream = stream
            self.format = format
            negotiation = CameraNegotiation(
                device: identity, request: request, choice: choice, fourcc: FourCC(littleEndian: pix.pixelformat),
                isEmulated: choice.isEmulated, width: Int(pix.width), height: Int(pix.height),
                bytesPerLine: Int(pix.bytesperline), sizeImage: Int(pix.sizeimage), frameRate: format.frameRate,
                rateIsSettable: settable, buffers: stream.buffers.count)
        } catch let error as V4L2Error {
            throw error.openError()
        } catch let error as CaptureError {
            throw error
        } catch {
            throw CaptureError.cannotOpen(source: path, reason: "\(error)")
        }
        let fiveFrames =
            format.frameRate.map {
                Timestamp.Duration(
                    nanoseconds: Rational.scale(5 * $0.denominator, by: 1_000_000_000, over: $0.numerator))
            } ?? .zero
        let timeouts = V4L2Camera.frameTimeouts(asked: stallTimeout, fiveFrames: fiveFrames)
        self.stallTimeout = timeouts.stall
        firstFrameTimeout = timeouts.firstFrame
        timeline = format.frameRate.map(FrameTimeline.init(rate:))
    }

    deinit {
        stream?.stop()
    }

    public func nextFrame() throws(CaptureError) -> VideoFrame? {
        try nextFrameEndingTheStreamOnFailure()
    }

    func nextFrame(from stream: V4L2Stream) throws(CaptureError) -> VideoFrame {
        let (wait, deadline) = frameWait()
        while true {
            if let failure = stream.failure { throw failure.streamError(frame: delivered + 1) }
            // Poll first: libv4l2 prints a line on stderr for every DQBUF that finds nothing.
            try waitForFrame(stream, until: deadline, waited: wait)
            let buffer: V4L2DequeuedBuffer
            do {
                // nil: taken by a conversion that failed (a corrupt JPEG): wait for the next.
                guard let taken = try stream.buffers.dequeue() else { continue }
                buffer = taken
            } catch {
                throw error.streamError(frame: delivered + 1)
            }
            let index = buffer.index
            let mappings = stream.buffers.mappings
            guard index >= 0, index < mappings.count, let base = mappings[index].base else {
                throw CaptureError.readFailed(
                    source: name, frame: delivered + 1,
                    reason: "the driver returned buffer \(index), which it never granted (\(mappings.count) buffers)")
            }
            let short = buffer.bytesUsed != 0 && buffer.bytesUsed < format.bufferSize
            if buffer.flags.contains(.error) || short {
                // Corrupt or short: back to the driver at once; the sequence gap counts it as lost.
                corruptFrames += 1
                stream.requeue(index)
                continue
            }
            let stamped = BufferTimestamp.capture(
                seconds: buffer.seconds, microseconds: buffer.microseconds, flags: buffer.flags.rawValue,
                dequeuedAt: Clock.monotonic.now())
            let time = timeline?.place(stamped) ?? stamped
            let (number, _) = sequence.count(buffer.sequence)
            let owner = stream
            let bytes = FrameBuffer(
                borrowing: base.assumingMemoryBound(to: UInt8.self), count: mappings[index].length,
                release: { owner.requeue(index) })
            delivered += 1
            return VideoFrame(format: format, buffer: bytes, timestamp: time, sequence: number)
        }
    }

    /// Returns when the driver has a frame; throws when `deadline` passes first or the
    /// stream broke.
    private func waitForFrame(
        _ stream: V4L2Stream, until deadline: Timestamp, waited: Timestamp.Duration
    ) throws(CaptureError) {
        while true {
            // A buffer the driver refused back (on the thread that released its frame) starves
            // the stream: that failure is the reason, not the stall it causes.
            if let failure = stream.failure { throw failure.streamError(frame: delivered + 1) }
            let remaining = deadline - Clock.monotonic.now()
            guard remaining > .zero else { throw CaptureError.stalled(source: name, seconds: waited.seconds) }
            let milliseconds = Int32(clamping: (remaining.nanoseconds + 999_999) / 1_000_000)
            let events: PollEvents
            do { events = try stream.device.poll(.readable, milliseconds: milliseconds) } catch {
                throw error.streamError(frame: delivered + 1)
            }
            if !events.isDisjoint(with: [.error, .hangUp, .invalid]) {
                // A vanished node answers POLLERR|POLLHUP; vb2 answers POLLERR when the queue broke.
                throw CaptureError.deviceLost(
                    source: name,
                    reason:
                        "\(V4L2Call.poll.action) failed: the driver reported an error on the stream (\(events)) — was the camera unplugged?"
                )
            }
            if events.contains(.readable) { return }
        }
    }

    /// S_FMT with the choice, then G_FMT: the driver may change size and stride.
    private static func setFormat(
        _ device: V4L2Device, _ choice: CameraFormatChoice, bytesPerLine: Int?
    ) throws(V4L2Error) -> v4l2_pix_format {
        var format = v4l2_format()
        format.type = V4L2Queue.capture.bufferType
        format.fmt.pix.width = UInt32(clamping: choice.width)
        format.fmt.pix.height = UInt32(clamping: choice.height)
        format.fmt.pix.pixelformat = choice.fourcc.littleEndianValue
        format.fmt.pix.field = V4L2_FIELD_NONE.rawValue
        format.fmt.pix.bytesperline = UInt32(clamping: bytesPerLine ?? 0)
        try device.control(CV4L2_VIDIOC_S_FMT, &format, .setFormat)
        var current = v4l2_format()
        current.type = V4L2Queue.capture.bufferType
        try device.control(CV4L2_VIDIOC_G_FMT, &current, .getFormat)
        return current.fmt.pix
    }

    private static func fieldOrder(_ field: UInt32, source: String) throws(CaptureError) -> FieldOrder {
        switch field {
        case V4L2_FIELD_NONE.rawValue, V4L2_FIELD_ANY.rawValue: return .progressive
        case V4L2_FIELD_INTERLACED_TB.rawValue, V4L2_FIELD_INTERLACED.rawValue: return .topFieldFirst
        case V4L2_FIELD_INTERLACED_BT.rawValue: return .bottomFieldFirst
        default:
            throw CaptureError.unsupported(
                source: source,
                problem: "the driver delivers separate fields (V4L2 field order \(field)), not whole frames")
        }
    }

    /// S_PARM when the driver takes a rate; returns the rate it reports afterwards.
    private static func setRate(
        _ device: V4L2Device, interval: Rational
    ) throws(V4L2Error) -> (Rational?, settable: Bool) {
        var parm = v4l2_streamparm()
        parm.type = V4L2Queue.capture.bufferType
        do { try device.control(CV4L2_VIDIOC_G_PARM, &parm, .getParameters) } catch {
            if error.code == EINVAL || error.code == ENOTTY { return (nil, false) }  // no rate control at all
            throw error
        }
        let settable = parm.parm.capture.capability & UInt32(V4L2_CAP_TIMEPERFRAME) != 0
        if settable, interval.numerator > 0, let n = UInt32(exactly: interval.numerator),
            let d = UInt32(exactly: interval.denominator)
        {
            parm.parm.capture.timeperframe = v4l2_fract(numerator: n, denominator: d)
            do { try device.control(CV4L2_VIDIOC_S_PARM, &parm, .setParameters) } catch {
                guard error.code == EINVAL || error.code == ENOTTY else { throw error }
            }
            parm = v4l2_streamparm()
            parm.type = V4L2Queue.capture.bufferType
            try device.control(CV4L2_VIDIOC_G_PARM, &parm, .getParameters)
        }
        let t = parm.parm.capture.timeperframe
        guard t.numerator > 0, t.denominator > 0 else { return (nil, settable) }
        return (Rational(Int64(t.denominator), Int64(t.numerator)), settable)
    }

    /// The pixel shape from VIDIOC_CROPCAP, when the driver says (nil for square or unknown).
    /// V4L2's `pixelaspect` is height over width of a pixel: a 59:54 (wide) PAL pixel is 54/59.
    private static func pixelAspect(_ device: V4L2Device) -> Rational? {
        var crop = v4l2_cropcap()
        crop.type = V4L2Queue.capture.bufferType
        // Optional: most webcams have none.
        do { try device.control(CV4L2_VIDIOC_CROPCAP, &crop, .cropCapabilities) } catch { return nil }
        let a = crop.pixelaspect
        guard a.numerator > 0, a.denominator > 0, a.numerator != a.denominator else { return nil }
        return Rational(Int64(a.denominator), Int64(a.numerator))
    }
}

/// A camera's stream: its memory-mapped buffers (`V4L2Buffers`, unmapped once the camera is
/// gone *and* the last frame using a buffer has been dropped) and whether it is running.
///
/// Sendable: the buffers never change after `init`; the stream state is behind a Mutex.
final class V4L2Stream: CameraStream, Sendable {
    let buffers: V4L2Buffers
    var device: V4L2Device { buffers.device }
    private struct State {
        var streaming = false
        var failure: V4L2Error?
    }
    private let state = Mutex(State())

    /// `count` buffers on the capture queue (the driver may grant another number), at least 2.
    init(device: V4L2Device, count: Int) throws(CaptureError) {
        do { buffers = try V4L2Buffers(device: device, queue: .capture, count: count) } catch {
            throw error.openError()
        }
        guard buffers.count >= 2 else {
            throw CaptureError.unsupported(
                source: device.path,
                problem: "the driver granted \(buffers.count) capture buffer(s); streaming needs at least 2")
        }
    }

    /// Queues every buffer and starts streaming.
    func start() throws(CaptureError) {
        let failure: V4L2Error? = state.withLock { state -> V4L2Error? in
            do throws(V4L2Error) {
                for index in buffers.mappings.indices { try buffers.queue(index) }
                try buffers.streamOn()
                state.streaming = true
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure.openError() }
    }

    /// Stops streaming; frames still out keep their bytes (the mapping stays until `deinit`).
    func stop() {
        state.withLock { state in
            guard state.streaming else { return }
            state.streaming = false
            // Fails only when the device is already gone, which stops the stream anyway.
            do throws(V4L2Error) { try buffers.streamOff() } catch {
                state.failure = state.failure ?? error
            }
        }
    }

    /// Gives buffer `index` back to the driver, from the thread that dropped its last frame.
    func requeue(_ index: Int) {
        state.withLock { state in
            guard state.streaming, state.failure == nil else { return }
            do throws(V4L2Error) { try buffers.queue(index) } catch { state.failure = error }
        }
    }

    /// The first failure while streaming (a QBUF that failed on another thread).
    var failure: V4L2Error? { state.withLock { $0.failure } }
}
