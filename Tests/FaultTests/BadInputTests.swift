import Foundation
import QuickTime
import Storage
import TestSupport
import Testing

/// Broken Y4M input for `vigil run` and `vigil analyze`: cut short anywhere, corrupt markers,
/// frames shorter or longer than the header says, headers that lie or are not headers at all.
/// Each gives a clear error naming the file and the frame (or the header field), an exit
/// status from sysexits (66 when the file cannot be used at all, 65 when it breaks part-way),
/// never a crash; a clip open when the input broke is closed and plays.
@Suite struct BadInputTests {
    /// 320×240 at 15 fps, 4 s, something crossing from 1 s to 3.5 s.
    static let width = 320, height = 240
    static let frameBytes = width * height * 3 / 2

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        /// The file's bytes, made from a good file's header and frames.
        var make: @Sendable (_ header: [UInt8], _ frames: [[UInt8]]) -> [UInt8]
        /// 66: unusable from the start; 65: broke part-way (after `clipFrames` frames of the clip).
        var status: Int32
        var message: String
        /// Whether an event had begun (at 1 s, frame 15) before the input broke.
        var clip = false
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "empty file", text: "", status: 66, message: "the file is empty"),
        Case(
            name: "a text file", text: "just some notes\nabout the yard\n", status: 66,
            message: "not YUV4MPEG2"),
        Case(
            name: "binary noise",
            make: { _, _ in (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) } }, status: 66,
            message: "not YUV4MPEG2"),
        Case(
            name: "header cut short", make: { h, _ in Array(h.prefix(14)) }, status: 66,
            message: "the file ends inside the header"),
        Case(
            name: "header without a width", text: "YUV4MPEG2 H240 F15:1 Ip C420jpeg\n",
            status: 66, message: "the width (W) is missing"),
        Case(
            name: "zero width", text: "YUV4MPEG2 W0 H240 F15:1\n", status: 66,
            message: "the width W0 is not a number"),
        Case(
            name: "absurd size", text: "YUV4MPEG2 W99999 H99999 F15:1\n", status: 66,
            message: "the width W99999"),
        Case(
            name: "a picture over the size limit",
            make: { _, _ in
                Array("YUV4MPEG2 W16384 H16384 F15:1 Ip C420jpeg\nFRAME\n".utf8) + [UInt8](repeating: 16, count: 4096)
            },
            status: 66, message: "the width W16384 is over Vigil's limit of 8192 pixels"),
        Case(
            name: "zero frame rate", text: "YUV4MPEG2 W320 H240 F0:0\n", status: 66,
            message: "the frame rate F0:0"),
        Case(
            name: "4:4:4 chroma", text: "YUV4MPEG2 W320 H240 F15:1 C444\n", status: 66,
            message: "chroma format C444 is not supported"),
        Case(
            name: "endless header line",
            make: { _, _ in Array("YUV4MPEG2 W320 H240 F15:1 X".utf8) + [UInt8](repeating: 65, count: 8000) + [10] },
            status: 66, message: "the header line is longer than 4096 bytes"),
        Case(
            name: "cut inside frame 40", make: { h, f in h + Array(f[..<39].joined()) + Array(f[39].prefix(6 + 5000)) },
            status: 65,
            message: "the file ends inside frame 40 (5000 of 115200 bytes)", clip: true),
        Case(
            name: "cut inside the marker of frame 40",
            make: { h, f in h + Array(f[..<39].joined()) + Array(f[39].prefix(3)) },
            status: 65, message: "the file ends inside frame 40", clip: true),
        Case(
            name: "corrupt marker at frame 40",
            make: { h, f in
                var frames = f
                frames[39].replaceSubrange(0..<6, with: "FRAMX\n".utf8)
                return h + frames.joined()
            },
            status: 65, message: "frame 40 does not start with FRAME (found", clip: true),
        Case(
            name: "short frames",
            make: { h, f in h + f.map { Array($0.prefix(6)) + Array($0.dropFirst(6).prefix(frameBytes - 640)) }.joined()
            },
            status: 65, message: "frame 2 does not start with FRAME"),
        Case(
            name: "long frames", make: { h, f in h + f.map { $0 + [UInt8](repeating: 16, count: 320) }.joined() },
            status: 65, message: "frame 2 does not start with FRAME"),
        Case(
            name: "header that lies about the size",
            make: { h, f in Array("YUV4MPEG2 W352 H288 F15:1 Ip A1:1 C420jpeg\n".utf8) + f.joined() },
            status: 65, message: "does not start with FRAME"),
    ]

    /// A good file's header and frames (each frame with its `FRAME` line).
    static let footage: Result<(header: [UInt8], frames: [[UInt8]]), any Error> = Result {
        let dir = try TemporaryDirectory("vigil-faults-input-source")
        defer { dir.remove() }
        let path = try writeFootage(scene(seconds: 4, objects: [crossing(1, 3.5)]), to: dir.file("good.y4m"))
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        guard let newline = bytes.firstIndex(of: 10) else { throw ToolError.notFound("a header in \(path)") }
        let header = Array(bytes[...newline])
        let frameLength = 6 + frameBytes
        let frames = stride(from: newline + 1, to: bytes.count, by: frameLength).map {
            Array(bytes[$0..<min($0 + frameLength, bytes.count)])
        }
        return (header, frames)
    }

    @Test(arguments: cases)
    func badInputGivesAClearErrorAndNoCrash(_ c: Case) throws {
        let (header, frames) = try Self.footage.get()
        try #require(frames.count == 60)
        let dir = try TemporaryDirectory("vigil-faults-input")
        defer { dir.remove() }
        let input = dir.file("input.y4m")
        #expect(FileManager.default.createFile(atPath: input, contents: Data(c.make(header, frames))))
        let storage = dir.file("clips")
        let config = try writeConfig(dir.file("vigil.conf"), footage: input, storage: storage)

        // The agent.
        let run = try runTool(
            builtExecutable("vigil"), ["run", "--config", config],
            environment: isolatedVigilEnvironment(in: dir, ["TZ": "UTC"]))
        #expect(run.status == c.status, "vigil run, \(c.name): exit \(run.status)\n\(run.stderr)")
        let errors = run.stderr.split(separator: "\n").map(String.init).filter { $0.contains("level=error") }
        #expect(errors.count == (c.status == 66 ? 1 : 2), "vigil run, \(c.name):\n\(run.stderr)")
        let named = errors.first { $0.contains("file:\(input)") && $0.contains(c.message) }
        #expect(named != nil, "vigil run, \(c.name): no error names the file and says “\(c.message)”:\n\(run.stderr)")
        if c.clip {
            // The event had begun: its clip was closed, and plays.
            let saved = logLines(run.stderr, "clip saved")
            #expect(saved.count == 1, "vigil run, \(c.name):\n\(run.stderr)")
            for file in movieFiles(in: storage) {
                #expect((try? MovieRepair.inspect(path: storage + "/" + file)) == .complete)
                try expectPlayable(storage + "/" + file, "vigil run, \(c.name):")
            }
        } else {
            #expect(!FileManager.default.fileExists(atPath: storage + "/events.jsonl"))
            #expect(movieFiles(in: storage).isEmpty)
            #expect(!run.stderr.contains("msg=\"clip started\""))
        }

        // Motion analysis of the same file.
        let analyze = try runTool(
            builtExecutable("vigil"), ["analyze", "--config", config, "--source", "file:" + input])
        #expect(analyze.status == c.status, "vigil analyze, \(c.name): exit \(analyze.status)\n\(analyze.stderr)")
        #expect(
            analyze.stderr.contains("file:\(input)") && analyze.stderr.contains(c.message),
            "vigil analyze, \(c.name): \(analyze.stderr)")
    }

    /// A file with a header and no frames is not an error: there is nothing to record.
    @Test func aHeaderWithNoFramesRecordsNothing() throws {
        let (header, _) = try Self.footage.get()
        let dir = try TemporaryDirectory("vigil-faults-input")
        defer { dir.remove() }
        let input = dir.file("input.y4m")
        #expect(FileManager.default.createFile(atPath: input, contents: Data(header)))
        let config = try writeConfig(dir.file("vigil.conf"), footage: input, storage: dir.file("clips"))
        let run = try runTool(
            builtExecutable("vigil"), ["run", "--config", config], environment: isolatedVigilEnvironment(in: dir))
        #expect(run.status == 0, "\(run.stderr)")
        #expect(
            run.stderr.contains("msg=\"end of source\"") && !run.stderr.contains("level=error")
                && !run.stderr.contains("level=warning"), "\(run.stderr)")
        #expect(movieFiles(in: dir.file("clips")).isEmpty)
    }

    /// A directory where the file should be.
    @Test func aDirectoryIsNotASource() throws {
        let dir = try TemporaryDirectory("vigil-faults-input")
        defer { dir.remove() }
        let input = dir.file("input.y4m")
        try FileManager.default.createDirectory(atPath: input, withIntermediateDirectories: true)
        let config = try writeConfig(dir.file("vigil.conf"), footage: input, storage: dir.file("clips"))
        let run = try runTool(
            builtExecutable("vigil"), ["run", "--config", config], environment: isolatedVigilEnvironment(in: dir))
        #expect(run.status == 66)
        #expect(run.stderr.contains("cannot open file:\(input): it is a directory"), "\(run.stderr)")
    }
}

extension BadInputTests.Case {
    /// A file that is `text` and nothing else, whatever the good file holds.
    init(name: String, text: String, status: Int32, message: String) {
        self.init(name: name, make: { _, _ in Array(text.utf8) }, status: status, message: message)
    }
}
