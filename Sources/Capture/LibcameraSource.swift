internal import CLibcameraPlugin
internal import Glibc
import Media
internal import POSIX
import Synchronization

/// What a libcamera camera agreed to.
public struct LibcameraNegotiation: Hashable, Sendable, CustomStringConvertible {
    /// The camera's id, as `cam -l` names it.
    public var camera: String
    /// libcamera's name for the pixel format it delivers ("NV12", "YUV420", "RGB888").
    public var pixelFormat: String
    public var width: Int
    public var height: Int
    public var stride: Int
    public var buffers: Int
    /// The frame duration set through FrameDurationLimits; nil when the camera has no such
    /// control (it runs at its own rate).
    public var frameDuration: Timestamp.Duration?
    /// Whether continuous autofocus was switched on (a camera with a focus motor).
    public var autofocus: Bool
    /// Nil when frames are the camera's buffers themselves; else why they are copied.
    public var copied: String?
    /// The libcamera the plugin was built against.
    public var libcameraVersion: String

    public var description: String {
        var text = "\(pixelFormat) \(width)x\(height) stride \(stride), \(buffers) buffers"
        text +=
            frameDuration.map { " at \(DecimalText.fixed(1e9 / Double($0.nanoseconds), 2)) fps" }
            ?? " at the camera's rate"
        if autofocus { text += ", continuous autofocus" }
        text += copied.map { ", copied: \($0)" } ?? ", not copied"
        return text + " (libcamera \(libcameraVersion))"
    }
}

/// A camera reached through libcamera (a Raspberry Pi camera module, or any camera libcamera
/// has a pipeline for), through the vigil-libcamera plugin.
///
/// Asks for NV12, else YUV420, at the requested size, and for the requested rate through
/// FrameDurationLimits; switches continuous autofocus on where the camera has it. Frames are
/// the camera's own buffers (each dmabuf mapped once) when their planes lie in one buffer;
/// else they are copied (and RGB converted) into Vigil's own. Each frame is stamped with the
/// sensor's timestamp on the monotonic clock and put on the grid of the rate
/// (`FrameTimeline`). A camera that is disconnected, fails, or stops delivering throws
/// `CaptureError.deviceLost`/`.stalled` as a V4L2 camera does; the caller opens it again later.
public final class LibcameraSource: FrameSource {
    public let name: String
    public let format: VideoFormat
    public let negotiation: LibcameraNegotiation
    /// Frames lost so far: gaps in the camera's sequence numbers.
    public var lostFrames: Int { sequence.lost }
    /// Buffers the camera flagged as corrupt (skipped).
    public private(set) var corruptFrames = 0
    public let stallTimeout: Timestamp.Duration
    public let firstFrameTimeout: Timestamp.Duration

    var stream: LibcameraStream?
    private let plan: LibcameraLayout.Plan
    private let pool: FramePool?
    private var sequence = SequenceCounter()
    private var timeline: FrameTimeline?
    private(set) var delivered = 0

    /// Opens camera `id` (nil: the first libcamera lists) and starts it.
    public convenience init(
        camera id: String?, request: CameraRequest, bufferCount: Int = 6, stallTimeout: Timestamp.Duration? = nil
    ) throws(CaptureError) {
        try self.init(
            camera: id, request: request, bufferCount: bufferCount, stallTimeout: stallTimeout,
            plugin: LibcameraPlugin.shared)
    }

    /// The same through `loaded` (tests pass a stand-in plugin).
    init(
        camera id: String?, request: CameraRequest, bufferCount: Int, stallTimeout: Timestamp.Duration?,
        plugin loaded: Result<LibcameraPlugin, LibcameraPluginError>
    ) throws(CaptureError) {
        let label = SourceSpecifier.libcamera(camera: id).description
        let plugin: LibcameraPlugin
        switch loaded {
        case .success(let loaded): plugin = loaded
        case .failure(let error): throw CaptureError.cannotOpen(source: label, reason: error.description)
        }
        var error = vigil_lc_error()
        guard let handle = (id ?? "").withCString({ plugin.open($0, &error) }) else {
            throw LibcameraSource.openError(label, LibcameraCallError(error))
        }
        let stream = LibcameraStream(plugin: plugin, handle: handle)
        let cameraID = plugin.cameraID(handle).map { String(cString: $0) } ?? (id ?? "")
        name = SourceSpecifier.libcamera(camera: cameraID).description

        var configured = vigil_lc_stream()
        guard
            plugin.configure(
                handle, UInt32(clamping: request.width), UInt32(clamping: request.height),
                UInt32(clamping: min(bufferCount, Int(VIGIL_LC_MAX_BUFFERS))), &configured, &error) == 0
        else { throw LibcameraSource.openError(name, LibcameraCallError(error)) }
        let pixelName = text(of: configured.format_name)
        guard let source = LibcameraLayout.Source(libcameraName: pixelName) else {
            throw CaptureError.unsupported(
                source: name,
                problem:
                    "the camera delivers \(pixelName), which Vigil cannot record (it takes NV12, YUV420, or 24- and 32-bit RGB); `vigil probe` lists the camera's formats"
            )
        }
        let buffers = elements(of: configured.buffers, as: vigil_lc_buffer.self, count: Int(configured.buffer_count))
            .map { buffer in
                elements(of: buffer.planes, as: vigil_lc_plane.self, count: Int(buffer.plane_count)).map {
                    LibcameraLayout.Plane(descriptor: $0.fd, offset: Int($0.offset), length: Int($0.length))
                }
            }
        let rate = request.frameRate
        let plan: LibcameraLayout.Plan
        do {
            plan = try LibcameraLayout.plan(
                source: source, width: Int(configured.width), height: Int(configured.height),
                stride: Int(configured.stride), buffers: buffers, frameRate: rate)
        } catch {
            throw CaptureError.unsupported(
                source: name,
                problem:
                    "the camera's \(pixelName) \(configured.width)x\(configured.height) buffers (stride \(configured.stride)) are unusable: \(error.problem)"
            )
        }
        do { try stream.map(buffers, plan: plan, source: source, stride: Int(configured.stride)) } catch {
            throw CaptureError.cannotOpen(source: name, reason: "mapping the camera's buffers (mmap) failed: \(error)")
        }
        let duration = Rational.scale(rate.denominator, by: 1_000_000_000, over: rate.numerator)
        var started = vigil_lc_started()
        guard plugin.start(handle, duration, &started, &error) == 0 else {
            throw LibcameraSource.openError(name, LibcameraCallError(error))
        }
        stream.started()
        self.stream = stream
        self.plan = plan
        // A camera without FrameDurationLimits (vimc) runs at its own rate, which it does not
        // state: frames keep their own timestamps, as a V4L2 camera's do at the driver's rate.
        let settable = started.frame_duration_ns > 0
        let copied: String?
        var format: VideoFormat
        switch plan {
        case .direct(let layout, _):
            format = layout
            pool = nil
            copied = nil
        case .copy(_, let layout, let reason):
            format = layout
            pool = FramePool(bufferSize: layout.bufferSize, maximumIdle: 4)
            copied = reason
        }
        if !settable { format.frameRate = nil }
        self.format = format
        negotiation = LibcameraNegotiation(
            camera: cameraID, pixelFormat: pixelName, width: Int(configured.width), height: Int(configured.height),
            stride: Int(configured.stride), buffers: buffers.count,
            frameDuration: started.frame_duration_ns > 0 ? .init(nanoseconds: started.frame_duration_ns) : nil,
            autofocus: started.autofocus != 0, copied: copied, libcameraVersion: plugin.libcameraVersion)
        let timeouts = LibcameraSource.frameTimeouts(
            asked: stallTimeout, fiveFrames: Timestamp.Duration(nanoseconds: 5 * duration))
        self.stallTimeout = timeouts.stall
        firstFrameTimeout = timeouts.firstFrame
        timeline = settable ? FrameTimeline(rate: rate) : nil
    }

    deinit {
        stream?.stop()
    }

    static func openError(_ source: String, _ error: LibcameraCallError) -> CaptureError {
        error.needsRestart
            ? .needsRestart(source: source, reason: error.message) : .cannotOpen(source: source, reason: error.message)
    }

    public func nextFrame() throws(CaptureError) -> VideoFrame? {
        try nextFrameEndingTheStreamOnFailure()
    }

    func nextFrame(from stream: LibcameraStream) throws(CaptureError) -> VideoFrame {
        let (wait, deadline) = frameWait()
        while true {
            if let failure = stream.failure { throw streamError(failure) }
            let remaining = deadline - Clock.monotonic.now()
            guard remaining > .zero else { throw CaptureError.stalled(source: name, seconds: wait.seconds) }
            var frame = vigil_lc_frame()
            var error = vigil_lc_error()
            let milliseconds = Int32(clamping: (remaining.nanoseconds + 999_999) / 1_000_000)
            let got = stream.plugin.dequeue(stream.handle, milliseconds, &frame, &error)
            if got < 0 { throw streamError(LibcameraCallError(error)) }
            if got == 0 { continue }
            let index = Int(frame.buffer)
            guard index >= 0, index < stream.mappings.count else {
                throw CaptureError.readFailed(
                    source: name, frame: delivered + 1,
                    reason:
                        "the camera completed buffer \(index), which it never granted (\(stream.mappings.count) buffers)"
                )
            }
            if frame.status == UInt32(VIGIL_LC_FRAME_CANCELLED) { continue }
            if frame.status != UInt32(VIGIL_LC_FRAME_OK) {
                corruptFrames += 1
                stream.requeue(index)
                continue
            }
            let stamped = LibcameraLayout.captureTime(
                sensor: frame.has_sensor_timestamp != 0 ? frame.sensor_timestamp_ns : nil,
                buffer: frame.buffer_timestamp_ns, monotonicNow: Clock.monotonic.now(), boottimeNow: BootClock.now())
            let time = timeline?.place(stamped) ?? stamped
            let (number, _) = sequence.count(frame.sequence)
            let bytes: FrameBuffer
            switch plan {
            case .direct:
                let owner = stream
                let mapping = stream.mappings[index][0]
                bytes = FrameBuffer(borrowing: mapping.base, count: mapping.length, release: { owner.requeue(index) })
            case .copy(let source, _, _):
                // A pool is made with every copy plan.
                bytes = pool!.take()
                LibcameraLayout.copy(
                    source, planes: stream.planeBases[index].map { UnsafePointer($0) }, strides: stream.strides,
                    into: bytes, format: format)
                stream.requeue(index)
            }
            delivered += 1
            return VideoFrame(format: format, buffer: bytes, timestamp: time, sequence: number)
        }
    }

    private func streamError(_ error: LibcameraCallError) -> CaptureError {
        if error.needsRestart { return .needsRestart(source: name, reason: error.message) }
        return error.meansCameraLost
            ? .deviceLost(source: name, reason: error.message)
            : .readFailed(source: name, frame: delivered + 1, reason: error.message)
    }
}

/// CLOCK_BOOTTIME: the monotonic clock plus the time spent suspended.
enum BootClock {
    static func now() -> Timestamp {
        var ts = timespec()
        guard clock_gettime(CLOCK_BOOTTIME, &ts) == 0 else { return Clock.monotonic.now() }
        return Timestamp(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }
}

/// An open libcamera camera, its mapped buffers and its stream state. Closed in `deinit`, which
/// runs after the source is gone *and* the last frame using one of its buffers has been dropped.
///
/// `@unchecked Sendable`: the handle and mappings never change after `map`; the plugin's calls
/// on a camera are safe from any thread; the stream state is behind a Mutex.
final class LibcameraStream: CameraStream, @unchecked Sendable {
    let plugin: LibcameraPlugin
    let handle: OpaquePointer
    /// Per buffer, one mapping per distinct dmabuf (a direct plan has exactly one).
    private(set) var mappings: [[MemoryMapping]] = []
    /// Per buffer, where each plane starts (for a copy).
    private(set) var planeBases: [[UnsafeMutablePointer<UInt8>]] = []
    private(set) var strides: [Int] = []
    private struct State {
        var streaming = false
        var failure: LibcameraCallError?
    }
    private let state = Mutex(State())

    init(plugin: LibcameraPlugin, handle: OpaquePointer) {
        self.plugin = plugin
        self.handle = handle
    }

    deinit {
        stop()
        mappings = []
        plugin.close(handle)
    }

    /// Maps each buffer's dmabufs once.
    func map(
        _ buffers: [[LibcameraLayout.Plane]], plan: LibcameraLayout.Plan, source: LibcameraLayout.Source, stride: Int
    ) throws(SystemError) {
        for planes in buffers {
            var byDescriptor: [Int32: MemoryMapping] = [:]
            var order: [MemoryMapping] = []
            for plane in planes where byDescriptor[plane.descriptor] == nil {
                let end = planes.filter { $0.descriptor == plane.descriptor }.map { $0.offset + $0.length }.max() ?? 0
                let mapping = try MemoryMapping(descriptor: plane.descriptor, length: end)
                byDescriptor[plane.descriptor] = mapping
                order.append(mapping)
            }
            mappings.append(order)
            planeBases.append(planes.map { byDescriptor[$0.descriptor]!.base + $0.offset })
        }
        switch source {
        case .yuv(let pixel):
            strides = (0..<pixel.planeCount).map { $0 == 0 || pixel == .nv12 ? stride : stride / 2 }
        case .rgb:
            strides = [stride]
        }
        if case .copy(.yuv(let pixel), let format, _) = plan, let first = buffers.first, first.count == 1 {
            // Contiguous planes described as one: find the others from the stride and height.
            let contiguous = try? VideoFormat(
                width: format.width, height: format.height, pixelFormat: pixel, bytesPerLine: stride)
            if let contiguous {
                planeBases = planeBases.map { bases in contiguous.planes.map { bases[0] + $0.offset } }
            }
        }
    }

    func started() {
        state.withLock { $0.streaming = true }
    }

    /// Stops streaming; frames still out keep their bytes (the mappings stay until `deinit`).
    func stop() {
        let wasStreaming = state.withLock { state -> Bool in
            defer { state.streaming = false }
            return state.streaming
        }
        if wasStreaming { plugin.stop(handle) }
    }

    /// Gives buffer `index` back to the camera, from the thread that dropped its last frame.
    func requeue(_ index: Int) {
        state.withLock { state in
            guard state.streaming, state.failure == nil else { return }
            var error = vigil_lc_error()
            if plugin.requeue(handle, UInt32(index), &error) != 0 { state.failure = LibcameraCallError(error) }
        }
    }

    /// The first failure while streaming (a requeue that failed on another thread).
    var failure: LibcameraCallError? { state.withLock { $0.failure } }
}
