import Capture
import Foundation
import Media
import TestSupport
import Testing

/// A Y4M file in memory: `header` (without newline), then `frames` frames of `frameBytes`
/// bytes, each byte of frame n being n·7 + offset (so frames differ).
func y4m(_ header: String, frames: Int, frameBytes: Int) -> Data {
    var data = Data((header + "\n").utf8)
    for n in 0..<frames {
        data.append(contentsOf: Array("FRAME\n".utf8))
        data.append(contentsOf: (0..<frameBytes).map { UInt8(truncatingIfNeeded: n * 7 + $0) })
    }
    return data
}

func readAll(_ path: String) throws(CaptureError) -> [VideoFrame] {
    let source = try Y4MSource(path: path)
    var frames: [VideoFrame] = []
    while let f = try source.nextFrame() { frames.append(f) }
    return frames
}

@Suite struct Y4MHeaderTests {
    @Test(arguments: [
        (
            "YUV4MPEG2 W16 H8 F30:1 Ip A1:1 C420jpeg", PixelFormat.i420, Rational(30, 1), Rational(1, 1) as Rational?,
            FieldOrder.progressive
        ),
        (
            "YUV4MPEG2 W16 H8 F30000:1001 It A0:0 C420mpeg2 XYSCSS=420MPEG2", .i420, Rational(30000, 1001), nil,
            .topFieldFirst
        ),
        (
            "YUV4MPEG2 W16 H8 F247:10 Ib A128:117 C420paldv", .i420, Rational(247, 10), Rational(128, 117),
            .bottomFieldFirst
        ),
        ("YUV4MPEG2 W16 H8 F25:1 C420", .i420, Rational(25, 1), nil, .progressive),
        ("YUV4MPEG2 W16 H8 F25:1 C422 XCOLORRANGE=LIMITED", .i422, Rational(25, 1), nil, .progressive),
        ("YUV4MPEG2 H8 W16 F25:1 Im I?", .i420, Rational(25, 1), nil, .progressive),
        ("YUV4MPEG2 W16 H8 F1:100 Im", .i420, Rational(1, 100), nil, .mixed),
    ])
    func headerFields(
        header: String, pixelFormat: PixelFormat, rate: Rational, aspect: Rational?, order: FieldOrder
    ) throws {
        let h = try Y4MHeader(line: Array(header.utf8), source: "test.y4m")
        #expect(h.width == 16 && h.height == 8)
        #expect(h.pixelFormat == pixelFormat)
        #expect(h.frameRate == rate)
        #expect(h.pixelAspectRatio == aspect)
        #expect(h.fieldOrder == order)
    }
}

@Suite struct Y4MReadingTests {
    /// Files written by ffmpeg, 4:2:0 and 4:2:2 at a non-integer rate: every frame, the
    /// picture bytes ffmpeg decodes, the rate, pixel aspect and field order from the header,
    /// and timestamps from the frame index.
    @Test(arguments: [("yuv420p", PixelFormat.i420), ("yuv422p", .i422)])
    func readsWhatFFmpegWrites(ffmpegFormat: String, pixelFormat: PixelFormat) throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("clip.y4m")
        try ffmpegTestPatternY4M(
            to: path, size: "96x64", rate: "24.7", frames: 7, filters: "setsar=10/11,setfield=tff",
            pixelFormat: ffmpegFormat)
        let raw = try runTool(
            "ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", ffmpegFormat, "-"])
        try #require(raw.status == 0)

        let source = try Y4MSource(path: path)
        #expect(source.name == "file:" + path)
        #expect(source.format.pixelFormat == pixelFormat)
        #expect(source.format.width == 96 && source.format.height == 64)
        #expect(source.format.frameRate == Rational(247, 10))
        #expect(source.format.pixelAspectRatio == Rational(10, 11))
        #expect(source.format.fieldOrder == .topFieldFirst)
        var bytes: [UInt8] = []
        var frames: [VideoFrame] = []
        while let f = try source.nextFrame() {
            bytes += UnsafeBufferPointer(start: f.buffer.base, count: f.format.bufferSize)
            frames.append(f)
        }
        #expect(frames.count == 7)
        #expect(frames.map(\.sequence) == Array(0..<7))
        #expect(frames.map(\.timestamp) == (0..<7).map { Timestamp(frameIndex: Int64($0), rate: Rational(247, 10)) })
        #expect(frames[1].timestamp.nanoseconds == 40_485_830)  // 10/247 s, rounded to the nanosecond
        #expect(bytes == [UInt8](raw.stdoutData))
        #expect(try source.nextFrame() == nil)  // stays at the end
    }

    @Test func frameParametersAreIgnoredAndStridesAreTight() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        var data = Data("YUV4MPEG2 W6 H4 F10:1 C420\n".utf8)
        data.append(Data("FRAME Ip XTAG=1\n".utf8))
        data.append(Data(repeating: 9, count: 36))
        let path = dir.file("params.y4m")
        try data.write(to: URL(fileURLWithPath: path))
        let frames = try readAll(path)
        #expect(frames.count == 1)
        #expect(frames[0].format.planes.map(\.stride) == [6, 3, 3])
        #expect(frames[0].plane(2).row(1).allSatisfy { $0 == 9 })
    }

    /// Lines longer than the reader's 4 KiB buffer, and frames that start anywhere in it: a
    /// header of nearly 4096 bytes (a comment field), frames of 6000 bytes, each read whole
    /// and in order.
    @Test(arguments: [10, 4000]) func framesAfterAHeaderOfAnyLengthAreReadWhole(comment: Int) throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let data = y4m(
            "YUV4MPEG2 W100 H40 F30:1 X" + String(repeating: "c", count: comment), frames: 3, frameBytes: 6000)
        let path = dir.file("long.y4m")
        try data.write(to: URL(fileURLWithPath: path))
        let frames = try readAll(path)
        try #require(frames.count == 3)
        for (n, frame) in frames.enumerated() {
            let bytes = UnsafeBufferPointer(start: frame.buffer.base, count: 6000)
            #expect(bytes.indices.allSatisfy { bytes[$0] == UInt8(truncatingIfNeeded: n * 7 + $0) }, "frame \(n)")
        }
    }
    @Test func headerOnlyFileHasNoFrames() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("empty.y4m")
        try y4m("YUV4MPEG2 W16 H8 F30:1", frames: 0, frameBytes: 0).write(to: URL(fileURLWithPath: path))
        #expect(try readAll(path).isEmpty)
    }
}

/// Malformed files give the documented error, naming the file (and the frame, counting from 1).
@Suite struct Y4MErrorTests {
    enum Kind: Sendable { case header, unsupported, marker, truncated, open }

    static let cases: [(String, Data, Kind, String)] = [
        ("bad magic", y4m("YUV4MPEG W16 H8 F30:1", frames: 1, frameBytes: 192), .header, "not YUV4MPEG2"),
        ("not y4m at all", Data([0x00, 0x00, 0x00, 0x18, 0x66, 0x74, 0x79, 0x70, 0x0A]), .header, "not YUV4MPEG2"),
        ("missing width", y4m("YUV4MPEG2 H8 F30:1", frames: 1, frameBytes: 192), .header, "width (W) is missing"),
        ("missing height", y4m("YUV4MPEG2 W16 F30:1", frames: 1, frameBytes: 192), .header, "height (H) is missing"),
        ("missing rate", y4m("YUV4MPEG2 W16 H8", frames: 1, frameBytes: 192), .header, "frame rate (F) is missing"),
        ("zero width", y4m("YUV4MPEG2 W0 H8 F30:1", frames: 1, frameBytes: 192), .header, "width W0"),
        (
            "huge width", y4m("YUV4MPEG2 W99999999999 H8 F30:1", frames: 1, frameBytes: 192), .header,
            "width W99999999999"
        ),
        ("negative height", y4m("YUV4MPEG2 W16 H-8 F30:1", frames: 1, frameBytes: 192), .header, "height H-8"),
        (
            "rate with zero denominator", y4m("YUV4MPEG2 W16 H8 F30:0", frames: 1, frameBytes: 192), .header,
            "frame rate F30:0"
        ),
        ("zero rate", y4m("YUV4MPEG2 W16 H8 F0:1", frames: 1, frameBytes: 192), .header, "frame rate F0:1"),
        ("rate not a ratio", y4m("YUV4MPEG2 W16 H8 Fabc", frames: 1, frameBytes: 192), .header, "frame rate Fabc"),
        (
            "absurd rate", y4m("YUV4MPEG2 W16 H8 F2147483647:1", frames: 1, frameBytes: 192), .header,
            "1000 frames per second"
        ),
        (
            "absurdly slow rate", y4m("YUV4MPEG2 W16 H8 F1:2147483647", frames: 1, frameBytes: 192), .header,
            "1 frame per 100 seconds"
        ),
        (
            "bad aspect", y4m("YUV4MPEG2 W16 H8 F30:1 A1:0", frames: 1, frameBytes: 192), .header,
            "pixel aspect ratio A1:0"
        ),
        ("bad interlacing", y4m("YUV4MPEG2 W16 H8 F30:1 Ix", frames: 1, frameBytes: 192), .header, "interlacing Ix"),
        (
            "unknown field", y4m("YUV4MPEG2 W16 H8 F30:1 Q9", frames: 1, frameBytes: 192), .header,
            "unknown field \"Q9\""
        ),
        ("header cut short", Data("YUV4MPEG2 W16 H8".utf8), .header, "ends inside the header"),
        (
            "endless header", Data(("YUV4MPEG2 " + String(repeating: "X", count: 5000)).utf8), .header,
            "longer than 4096"
        ),
        ("empty file", Data(), .header, "empty"),
        (
            "a picture over the size limit", y4m("YUV4MPEG2 W16384 H16384 F30:1", frames: 0, frameBytes: 0),
            .unsupported, "the width W16384 is over Vigil's limit of 8192 pixels"
        ),
        (
            "a height over the size limit", y4m("YUV4MPEG2 W16 H8194 F30:1", frames: 0, frameBytes: 0), .unsupported,
            "the height H8194 is over Vigil's limit of 8192 pixels"
        ),
        (
            "4:4:4", y4m("YUV4MPEG2 W16 H8 F30:1 C444", frames: 1, frameBytes: 384), .unsupported,
            "C444 is not supported"
        ),
        (
            "monochrome", y4m("YUV4MPEG2 W16 H8 F30:1 Cmono", frames: 1, frameBytes: 128), .unsupported,
            "Cmono is not supported"
        ),
        (
            "10-bit", y4m("YUV4MPEG2 W16 H8 F30:1 C420p10", frames: 1, frameBytes: 384), .unsupported,
            "C420p10 is not supported"
        ),
        (
            "frame cut short", y4m("YUV4MPEG2 W16 H8 F30:1", frames: 2, frameBytes: 192).dropLast(50), .truncated,
            "frame 2 (142 of 192 bytes)"
        ),
        (
            "marker cut short", y4m("YUV4MPEG2 W16 H8 F30:1", frames: 1, frameBytes: 192) + Data("FRA".utf8),
            .truncated, "frame 2 (0 of 192 bytes)"
        ),
        (
            "marker missing", Data("YUV4MPEG2 W16 H8 F30:1\n".utf8) + Data(repeating: 0x41, count: 192), .marker,
            "frame 1 does not start with FRAME (found \"AAAAAAAAAAAA\")"
        ),
        (
            "marker garbled", y4m("YUV4MPEG2 W16 H8 F30:1", frames: 1, frameBytes: 192) + Data("FRAMEX\n".utf8),
            .marker, "frame 2 does not start with FRAME"
        ),
        (
            "frames smaller than the header says", y4m("YUV4MPEG2 W16 H8 F30:1", frames: 4, frameBytes: 96), .marker,
            "frame 2 does not start with FRAME"
        ),
        (
            "frames larger than the header says", y4m("YUV4MPEG2 W8 H8 F30:1", frames: 3, frameBytes: 192), .marker,
            "frames are not the 96 bytes each"
        ),
    ]

    @Test(arguments: cases.indices)
    func malformedInputGivesTheDocumentedError(index: Int) throws {
        let (name, data, kind, message) = Y4MErrorTests.cases[index]
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("bad.y4m")
        try data.write(to: URL(fileURLWithPath: path))
        let error = expectError(CaptureError.self, "\(name)") { _ = try readAll(path) }
        let text = error?.description ?? ""
        #expect(text.contains("file:" + path), "\(name): \(text)")
        #expect(text.contains(message), "\(name): \(text)")
        switch (kind, error) {
        case (.header, .invalidHeader?), (.unsupported, .unsupported?), (.marker, .badFrameMarker?),
            (.truncated, .truncatedFrame?):
            break
        default:
            Issue.record("\(name): unexpected error kind \(String(describing: error))")
        }
    }

    @Test func missingFileNamesThePath() throws {
        let error = expectError(CaptureError.self) { _ = try Y4MSource(path: "/nonexistent/dir/clip.y4m") }
        #expect(
            error?.description
                == "cannot open file:/nonexistent/dir/clip.y4m: No such file or directory — check the path in camera.device"
        )
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let isDirectory = expectError(CaptureError.self) { _ = try Y4MSource(path: dir.path) }
        #expect(isDirectory?.description.contains("is a directory") == true)
    }

    /// Cut a small file at every byte: a cut between frames is a clean end with the
    /// complete frames; anywhere else it is an error naming the file and the frame. Never a crash.
    @Test func truncationAtEveryPosition() throws {
        let full = y4m("YUV4MPEG2 W8 H4 F25:1 C420jpeg", frames: 3, frameBytes: 48)
        let headerLength = "YUV4MPEG2 W8 H4 F25:1 C420jpeg\n".utf8.count
        let frameLength = 6 + 48
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("cut.y4m")
        for length in 0...full.count {
            try full.prefix(length).write(to: URL(fileURLWithPath: path))
            let afterHeader = length - headerLength
            do {
                let frames = try readAll(path)
                #expect(afterHeader >= 0 && afterHeader % frameLength == 0, "a cut at \(length) read as a clean end")
                #expect(frames.count == afterHeader / frameLength)
            } catch {
                #expect(error.description.contains("file:" + path))
                if afterHeader > 0 {
                    let frame = afterHeader / frameLength + 1
                    #expect(
                        error
                            == .truncatedFrame(
                                source: "file:" + path, frame: frame,
                                bytesRead: max(0, afterHeader % frameLength - 6), bytesExpected: 48),
                        "cut at \(length): \(error)")
                } else {
                    guard case .invalidHeader = error else {
                        Issue.record("cut at \(length): \(error)")
                        continue
                    }
                }
            }
        }
    }

    /// Overwrite each byte of the header and the first frame marker with junk: every result
    /// is read or refused with an error, never a crash.
    @Test func corruptionAtEveryHeaderByte() throws {
        let full = y4m("YUV4MPEG2 W8 H4 F25:1 It A1:1 C420jpeg", frames: 2, frameBytes: 48)
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("junk.y4m")
        var outcomes = (read: 0, refused: 0)
        for position in 0..<50 {
            for junk: UInt8 in [0x00, 0x0A, 0x20, 0x39, 0x3A, 0xFF] {
                var data = full
                data[position] = junk
                try data.write(to: URL(fileURLWithPath: path))
                do {
                    _ = try readAll(path)
                    outcomes.read += 1
                } catch {
                    #expect(error.description.contains("file:" + path))
                    #expect(!error.description.contains("\n"))
                    outcomes.refused += 1
                }
            }
        }
        #expect(outcomes.read > 0 && outcomes.refused > 0)
    }
}
