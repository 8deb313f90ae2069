import Media

/// Where frames come from: a camera, the synthetic scene, or a Y4M file.
///
/// The agent calls `nextFrame()` in a loop on a dedicated capture thread (it blocks until the
/// next frame is captured or due). Every frame has the source's `format`. Frame bytes may
/// belong to a pooled buffer (a camera's mmapped buffer, or a reused heap buffer): they stay
/// valid as long as the frame value is kept, and return to the source when the last copy is
/// dropped — so hold frames only as long as needed, or the source runs out of buffers
/// (a camera then drops frames, which shows as a gap in `sequence`).
public protocol FrameSource: AnyObject {
    /// The negotiated format: size, pixel format, plane strides, nominal rate, pixel aspect.
    var format: VideoFormat { get }
    /// Names the source in logs and errors: `synthetic`, `file:PATH`, a device path.
    var name: String { get }
    /// The next frame, or nil after the last frame of a finite source (end of file).
    func nextFrame() throws(CaptureError) -> VideoFrame?
}

/// What `camera.device` selects.
public enum SourceSpecifier: Hashable, Sendable, CustomStringConvertible {
    /// The built-in synthetic scene.
    case synthetic
    /// A YUV4MPEG2 file (`file:PATH`).
    case file(path: String)
    /// A V4L2 device node (`/dev/video0`, `/dev/v4l/by-id/...`).
    case device(path: String)
    /// A camera reached through libcamera (`libcamera`: the first; `libcamera:ID`: the one
    /// `cam -l` names ID), through the vigil-libcamera plugin.
    case libcamera(camera: String?)

    /// A camera (V4L2 or libcamera): one that fails is waited for and opened again.
    public var isCamera: Bool {
        switch self {
        case .device, .libcamera: true
        case .synthetic, .file: false
        }
    }

    /// Parses a source's name (the configuration's camera device, `vigil analyze --source`):
    /// `synthetic`, `file:PATH.y4m`, a device path, `libcamera` or `libcamera:ID`.
    public init(parsing text: String) throws(CaptureError) {
        if text == "synthetic" {
            self = .synthetic
        } else if text == "libcamera" {
            self = .libcamera(camera: nil)
        } else if text.hasPrefix("libcamera:") {
            let id = String(text.dropFirst(10))
            guard !id.isEmpty else {
                throw .invalidSettings(
                    setting: "source",
                    problem:
                        "'libcamera:' needs a camera id after it, as `cam -l` or `vigil probe` names it, or use 'libcamera' for the first camera"
                )
            }
            self = .libcamera(camera: id)
        } else if text.hasPrefix("file:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else {
                throw .invalidSettings(
                    setting: "source", problem: "'file:' needs a path after it, as in file:/srv/footage/yard.y4m")
            }
            self = .file(path: path)
        } else if text.hasPrefix("/") {
            self = .device(path: text)
        } else {
            throw .invalidSettings(
                setting: "source",
                problem:
                    "'\(text)' is not a source: use a device path such as /dev/video0, 'libcamera' (a Raspberry Pi camera module), 'synthetic', or file:PATH.y4m"
            )
        }
    }

    public var description: String {
        switch self {
        case .synthetic: "synthetic"
        case .file(let path): "file:" + path
        case .device(let path): path
        case .libcamera(let camera): camera.map { "libcamera:" + $0 } ?? "libcamera"
        }
    }
}

/// Why a source could not be opened or read. Frame numbers in these errors count from 1
/// (the first frame of a file is frame 1).
public enum CaptureError: Error, Equatable, CustomStringConvertible {
    /// A source setting is unusable.
    case invalidSettings(setting: String, problem: String)
    case cannotOpen(source: String, reason: String)
    /// Reading frame `frame` failed in the operating system (an I/O error, not bad data).
    case readFailed(source: String, frame: Int, reason: String)
    /// The stream header is malformed: the problem names the field.
    case invalidHeader(source: String, problem: String)
    /// The stream is well-formed but uses something Vigil does not read.
    case unsupported(source: String, problem: String)
    /// Frame `frame` does not start with its marker (`FRAME` in Y4M); `found` shows what is there.
    case badFrameMarker(source: String, frame: Int, found: String, frameBytes: Int)
    /// The input ends inside frame `frame`.
    case truncatedFrame(source: String, frame: Int, bytesRead: Int, bytesExpected: Int)
    /// A device went away or broke while running (unplugged, I/O error): close it and open it
    /// again later.
    case deviceLost(source: String, reason: String)
    /// A running device delivered nothing for `seconds`.
    case stalled(source: String, seconds: Double)
    /// The device cannot be opened again by this process, only by a new one (a libcamera
    /// camera that vanished while streaming): the agent stops so that its service restarts it.
    case needsRestart(source: String, reason: String)

    public var description: String {
        switch self {
        case .invalidSettings(let setting, let problem):
            "\(setting): \(problem)"
        case .cannotOpen(let source, let reason):
            "cannot open \(source): \(reason)"
        case .readFailed(let source, let frame, let reason):
            "\(source): reading frame \(frame) failed: \(reason)"
        case .invalidHeader(let source, let problem):
            "\(source): not a valid YUV4MPEG2 header: \(problem); write the file with `ffmpeg -i INPUT -pix_fmt yuv420p -f yuv4mpegpipe OUTPUT.y4m`"
        case .unsupported(let source, let problem):
            "\(source): \(problem)"
        case .badFrameMarker(let source, let frame, let found, let frameBytes):
            "\(source): frame \(frame) does not start with FRAME (found \"\(found)\"); the file is corrupt, or its frames are not the \(frameBytes) bytes each that the header's size and chroma format make"
        case .truncatedFrame(let source, let frame, let read, let expected):
            "\(source): the file ends inside frame \(frame) (\(read) of \(expected) bytes); it was cut short — the frames before it are usable"
        case .deviceLost(let source, let reason):
            "\(source) stopped working: \(reason)"
        case .needsRestart(let source, let reason):
            "\(source): \(reason)"
        case .stalled(let source, let seconds):
            "\(source) delivered nothing for \(DecimalText.fixed(seconds, 1)) s — the device stalled (driver or firmware hang, or a loose cable)"
        }
    }
}
