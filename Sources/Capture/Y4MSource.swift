internal import Glibc
import Media
internal import POSIX

/// The stream header of a YUV4MPEG2 file: `YUV4MPEG2 W<w> H<h> F<n>:<d> [I<p|t|b|m|?>]
/// [A<n>:<d>] [C<chroma>] [X<anything>]…`, space-separated, ending in a newline.
public struct Y4MHeader: Hashable, Sendable {
    public var width: Int
    public var height: Int
    public var frameRate: Rational
    /// From `A`; nil when absent or `A0:0` (unknown).
    public var pixelAspectRatio: Rational?
    public var fieldOrder: FieldOrder
    /// `i420` for `C420jpeg`, `C420mpeg2`, `C420paldv`, `C420` (and no `C`); `i422` for `C422`.
    public var pixelFormat: PixelFormat
    /// The `C` tag as written (`420jpeg` when absent).
    public var chroma: String

    static let magic = "YUV4MPEG2"
    static let maximumLine = 4096
    /// Frame rates from one frame per 100 s to 1000 per second.
    static let rateLimits = (lowest: Rational(1, 100), highest: Rational(1000, 1))

    /// Parses the header line (without its newline). `source` names the file in errors.
    public init(line: [UInt8], source: String) throws(CaptureError) {
        func bad(_ problem: String) -> CaptureError { .invalidHeader(source: source, problem: problem) }
        guard line.starts(with: Array(Y4MHeader.magic.utf8)) else {
            let shown = String(decoding: line.prefix(16), as: UTF8.self)
            throw bad("it starts with \"\(printable(shown))\", not YUV4MPEG2")
        }
        let fields = line.dropFirst(Y4MHeader.magic.utf8.count).split(separator: UInt8(ascii: " "))
        var width: Int?, height: Int?, rate: Rational?
        var aspect: Rational?
        var order = FieldOrder.progressive
        var chroma = "420jpeg"
        for field in fields {
            guard let tag = field.first else { continue }
            // Shown in messages as it is, except for control and non-ASCII bytes.
            let value = printable(String(decoding: field.dropFirst(), as: UTF8.self))
            switch tag {
            case UInt8(ascii: "W"):
                width = try Y4MHeader.dimension("the width W", value, source: source)
            case UInt8(ascii: "H"):
                height = try Y4MHeader.dimension("the height H", value, source: source)
            case UInt8(ascii: "F"):
                guard let (n, d) = Y4MHeader.ratio(value), n > 0, d > 0 else {
                    throw bad("the frame rate F\(value) is not two positive numbers as in F30000:1001")
                }
                // Compare n/d with the limits in integers (n, d < 2^31, so products fit).
                let low = Y4MHeader.rateLimits.lowest, high = Y4MHeader.rateLimits.highest
                guard n * low.denominator >= low.numerator * d, n * high.denominator <= high.numerator * d else {
                    throw bad("the frame rate F\(value) is outside 1 frame per 100 seconds to 1000 frames per second")
                }
                rate = Rational(n, d)
            case UInt8(ascii: "A"):
                guard let (n, d) = Y4MHeader.ratio(value), (n == 0) == (d == 0) else {
                    throw bad("the pixel aspect ratio A\(value) is not two numbers as in A1:1 (or A0:0 for unknown)")
                }
                aspect = n == 0 ? nil : Rational(n, d)
            case UInt8(ascii: "I"):
                switch value {
                case "p", "?": order = .progressive
                case "t": order = .topFieldFirst
                case "b": order = .bottomFieldFirst
                case "m": order = .mixed
                default: throw bad("the interlacing I\(value) is not one of Ip, It, Ib, Im, I?")
                }
            case UInt8(ascii: "C"):
                chroma = value
            case UInt8(ascii: "X"):
                break  // extensions (XYSCSS=…, XCOLORRANGE=…) are ignored
            default:
                throw bad("it has an unknown field \"\(printable(String(decoding: field.prefix(24), as: UTF8.self)))\"")
            }
        }
        guard let width else { throw bad("the width (W) is missing") }
        guard let height else { throw bad("the height (H) is missing") }
        guard let rate else { throw bad("the frame rate (F) is missing") }
        switch chroma {
        case "420jpeg", "420mpeg2", "420paldv", "420": pixelFormat = .i420
        case "422": pixelFormat = .i422
        default:
            throw .unsupported(
                source: source,
                problem:
                    "chroma format C\(chroma) is not supported (only 4:2:0 and 4:2:2 8-bit: C420jpeg, C420mpeg2, C420paldv, C420, C422); convert it with `ffmpeg -i INPUT -pix_fmt yuv420p -f yuv4mpegpipe OUTPUT.y4m`"
            )
        }
        self.width = width
        self.height = height
        self.frameRate = rate
        self.pixelAspectRatio = aspect
        self.fieldOrder = order
        self.chroma = chroma
    }

    /// The number of a `W` or `H` field (`what` names it in errors), from 1 to
    /// `VideoFormat.maximumDimension`: a larger picture is refused here, before any buffer
    /// for its frames is allocated.
    static func dimension(_ what: String, _ value: String, source: String) throws(CaptureError) -> Int {
        let limit = VideoFormat.maximumDimension
        guard let n = Y4MHeader.integer(value), n >= 1 else {
            throw .invalidHeader(source: source, problem: "\(what)\(value) is not a number from 1 to \(limit)")
        }
        guard n <= limit else {
            throw .unsupported(
                source: source,
                problem:
                    "\(what)\(value) is over Vigil's limit of \(limit) pixels a side, which keeps a frame's memory bounded (one of \(limit)×\(limit) is \(VideoFormat.largestFrameBytes >> 20) MiB); scale the video down, e.g. `ffmpeg -i INPUT -vf scale=1920:-2 -pix_fmt yuv420p -f yuv4mpegpipe OUTPUT.y4m`"
            )
        }
        return n
    }

    /// A non-negative decimal integer below 2^31, or nil.
    static func integer(_ text: String) -> Int? {
        guard !text.isEmpty, text.count <= 10, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            let v = Int(text), v <= Int(Int32.max)
        else { return nil }
        return v
    }

    /// `n:d` with both parts as `integer` accepts.
    static func ratio(_ text: String) -> (Int64, Int64)? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let n = integer(String(parts[0])), let d = integer(String(parts[1])) else { return nil }
        return (Int64(n), Int64(d))
    }
}

/// Shows control characters and non-ASCII bytes as `?`, so an error message stays one line.
func printable(_ text: String) -> String {
    String(text.unicodeScalars.map { $0.value >= 0x20 && $0.value < 0x7F ? Character($0) : "?" })
}

/// Frames from a YUV4MPEG2 file (what `ffmpeg -f yuv4mpegpipe` writes).
///
/// Frame `n` (counting from 0) has timestamp `n / rate` and sequence number `n`. Frames are
/// read straight into pooled buffers. Errors name the file and the frame, counting from 1.
public final class Y4MSource: FrameSource {
    public let path: String
    public let header: Y4MHeader
    public let format: VideoFormat
    public var name: String { "file:" + path }
    /// Frames returned so far.
    public private(set) var framesRead: Int64 = 0

    private let reader: FileReader
    private let pool: FramePool
    private let realtime: Bool
    private var pacer = Pacer()
    private var finished = false

    /// Opens `path` and reads its header; `realtime` paces frames to their timestamps.
    public init(path: String, realtime: Bool = false) throws(CaptureError) {
        self.path = path
        let name = "file:" + path
        let reader = try FileReader(path: path, source: name)
        guard let line = try reader.readLine(maximum: Y4MHeader.maximumLine, frame: 0) else {
            throw .invalidHeader(source: name, problem: "the file is empty")
        }
        guard line.complete else {
            let problem =
                line.bytes.count >= Y4MHeader.maximumLine
                ? "the header line is longer than \(Y4MHeader.maximumLine) bytes"
                : "the file ends inside the header"
            if !line.bytes.starts(with: Array(Y4MHeader.magic.utf8))
                && !Array(Y4MHeader.magic.utf8).starts(with: line.bytes)
            {
                _ = try Y4MHeader(line: line.bytes, source: name)  // reports the wrong magic
            }
            throw .invalidHeader(source: name, problem: problem)
        }
        let header = try Y4MHeader(line: line.bytes, source: name)
        self.header = header
        do {
            format = try VideoFormat(
                width: header.width, height: header.height, pixelFormat: header.pixelFormat,
                frameRate: header.frameRate, pixelAspectRatio: header.pixelAspectRatio,
                fieldOrder: header.fieldOrder)
        } catch {
            throw .invalidHeader(source: name, problem: error.problem)
        }
        self.reader = reader
        self.pool = FramePool(bufferSize: format.bufferSize)
        self.realtime = realtime
    }

    /// The next frame, nil at a clean end of file (right after a complete frame).
    public func nextFrame() throws(CaptureError) -> VideoFrame? {
        guard !finished else { return nil }
        let number = Int(framesRead) + 1  // for errors, counting from 1
        guard let line = try reader.readLine(maximum: 256, frame: number) else {
            finished = true
            return nil
        }
        let marker = Array("FRAME".utf8)
        guard line.complete, line.bytes.starts(with: marker),
            line.bytes.count == marker.count || line.bytes[marker.count] == UInt8(ascii: " ")
        else {
            finished = true
            if !line.complete && line.bytes.count < 256
                && (marker.starts(with: line.bytes) || line.bytes.starts(with: marker))
            {
                throw .truncatedFrame(source: name, frame: number, bytesRead: 0, bytesExpected: format.bufferSize)
            }
            let shown = String(decoding: line.bytes.prefix(12), as: UTF8.self)
            throw .badFrameMarker(source: name, frame: number, found: printable(shown), frameBytes: format.bufferSize)
        }
        let buffer = pool.take()
        let got = try reader.read(into: buffer.base, count: format.bufferSize, frame: number)
        guard got == format.bufferSize else {
            finished = true
            throw .truncatedFrame(source: name, frame: number, bytesRead: got, bytesExpected: format.bufferSize)
        }
        let index = framesRead
        framesRead += 1
        let frame = VideoFrame(
            format: format, buffer: buffer, timestamp: Timestamp(frameIndex: index, rate: header.frameRate),
            sequence: UInt64(index))
        if realtime { pacer.wait(for: frame.timestamp) }
        return frame
    }
}

/// Buffered reading from a file descriptor: lines for headers, large reads straight into
/// the caller's memory for frame data.
final class FileReader {
    /// Read-only, closed when the reader goes: nothing can be lost if closing reports an error.
    private let file: FileDescriptor
    private let source: String
    private let buffer: UnsafeMutablePointer<UInt8>
    // Small: a frame is read straight into its buffer; only what came with the header line is
    // copied from here (a 64 KiB buffer made that a 64 KiB copy per frame).
    private let capacity = 1 << 12
    private var start = 0
    private var end = 0
    private var atEnd = false

    init(path: String, source: String) throws(CaptureError) {
        let file: FileDescriptor
        do { file = try FileDescriptor(opening: path, .readOnly) } catch {
            let hint =
                error.code == ENOENT
                ? " — check the path in camera.device" : error.code == EACCES ? " — check the file's permissions" : ""
            throw .cannotOpen(source: source, reason: error.text + hint)
        }
        let isDirectory: Bool
        do { isDirectory = try file.status().isDirectory } catch {
            throw .cannotOpen(source: source, reason: error.text)
        }
        if isDirectory {
            throw .cannotOpen(source: source, reason: "it is a directory, not a .y4m file")
        }
        self.file = file
        self.source = source
        self.buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
    }

    deinit {
        buffer.deallocate()
    }

    /// Reads into `destination`: up to `count` bytes, or all of them (unless the file ends
    /// first) when `fully`. 0 at the end of the file.
    private func read(
        _ destination: UnsafeMutableRawPointer, _ count: Int, fully: Bool, frame: Int
    ) throws(CaptureError) -> Int {
        let buffer = UnsafeMutableRawBufferPointer(start: destination, count: count)
        do {
            return fully ? try file.readFully(into: buffer) : try file.read(into: buffer)
        } catch {
            throw .readFailed(source: source, frame: frame, reason: error.text)
        }
    }

    private func refill(frame: Int) throws(CaptureError) {
        if start > 0 {
            buffer.update(from: buffer + start, count: end - start)
            end -= start
            start = 0
        }
        guard !atEnd, end < capacity else { return }
        let n = try read(buffer + end, capacity - end, fully: false, frame: frame)
        if n == 0 { atEnd = true }
        end += n
    }

    /// The bytes up to the next newline (not included). `complete` is false when the file
    /// ended, or `maximum` bytes passed, before a newline. Nil at end of file.
    func readLine(maximum: Int, frame: Int) throws(CaptureError) -> (bytes: [UInt8], complete: Bool)? {
        var line: [UInt8] = []
        while true {
            if start == end {
                try refill(frame: frame)
                if start == end { return line.isEmpty ? nil : (line, false) }
            }
            let available = UnsafeBufferPointer(start: buffer + start, count: end - start)
            let newline: Int? = available.firstIndex(of: UInt8(ascii: "\n")).map { start + $0 }
            let stop = newline ?? end
            let take = min(stop - start, maximum - line.count)
            line.append(contentsOf: UnsafeBufferPointer(start: buffer + start, count: take))
            start += take
            if line.count >= maximum && (newline.map { start < $0 } ?? true) { return (line, false) }
            if let newline, start == newline {
                start += 1
                return (line, true)
            }
        }
    }

    /// Reads exactly `count` bytes unless the file ends first; returns how many were read.
    func read(into destination: UnsafeMutablePointer<UInt8>, count: Int, frame: Int) throws(CaptureError) -> Int {
        let buffered = min(count, end - start)
        destination.update(from: buffer + start, count: buffered)
        start += buffered
        guard buffered < count && !atEnd else { return buffered }
        let n = try read(destination + buffered, count - buffered, fully: true, frame: frame)
        if buffered + n < count { atEnd = true }
        return buffered + n
    }
}
