import Foundation
import Media
import Storage
import TestSupport
import Testing

@testable import QuickTime

/// A movie file that only lets itself be read: any write, cut or sync is a test failure.
final class ReadOnlyFile: MovieFile {
    let inner: FileMovieOutput
    private(set) var changes: [String] = []

    init(_ path: String) throws(FileError) { inner = try FileMovieOutput(updating: path) }

    var length: UInt64 { inner.length }
    func read(at offset: UInt64, count: Int) throws(FileError) -> [UInt8] { try inner.read(at: offset, count: count) }
    func close() throws(FileError) { try inner.close() }
    func append(_ bytes: [UInt8]) throws(FileError) { changes.append("append") }
    func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(FileError) { changes.append("overwrite") }
    func synchronize() throws(FileError) { changes.append("sync") }
    func truncate(to newLength: UInt64) throws(FileError) { changes.append("truncate") }
}

/// `MovieRepair.contents`: what a complete movie holds, read from its index without changing it.
@Suite struct MovieContentsTests {
    /// Reads `path`'s contents through a file that records any change.
    func contents(_ path: String) throws(MovieRepairError) -> (MovieContents?, changes: [String]) {
        nonisolated(unsafe) var file: ReadOnlyFile?
        let contents = try MovieRepair.contents(
            path: path,
            opening: { path throws(FileError) in
                let opened = try ReadOnlyFile(path)
                file = opened
                return opened
            })
        return (contents, file?.changes ?? [])
    }

    @Test func aCompleteMovieSaysWhatItsWriterSaid() throws {
        let path = Fixture.directory.file("contents.mov")
        let (writer, open) = try SmallFixture.write(
            to: try FileMovieOutput(creating: path), path: path, close: false)
        try writer.append(try #require(open))
        let summary = try writer.close()
        let before = fileBytes(path)

        let (read, changes) = try contents(path)
        let movie = try #require(read)
        #expect(changes.isEmpty)
        #expect(fileBytes(path) == before)
        #expect(movie.created == Date(timeIntervalSince1970: 1_790_000_000))
        #expect(movie.videoFrames == summary.videoFrames && movie.videoFrames == 60)
        #expect(movie.audioFrames == summary.audioFrames && movie.audioFrames > 0)
        #expect(movie.videoDuration == summary.duration)
        #expect(movie.bytes == summary.bytes && movie.bytes == UInt64(before.count))
        // The independent reader agrees.
        let probe = try FFprobe.probe(path)
        #expect(probe.video?["nb_frames"] == "\(movie.videoFrames)")
        #expect(probe.audio?["duration_ts"] == "\(movie.audioFrames)")

        let silent = try SmallFixture.file("contents-silent.mov", close: true, audio: false)
        #expect(try contents(silent).0?.audioFrames == 0)
    }

    /// An interrupted recording is not complete: nil, untouched. Once repaired, it says what
    /// the repair said.
    @Test func anInterruptedMovieIsNotCompleteUntilRepaired() throws {
        let path = try SmallFixture.file("contents-interrupted.mov", close: false)
        let before = fileBytes(path)
        let (read, changes) = try contents(path)
        #expect(read == nil)
        #expect(changes.isEmpty && fileBytes(path) == before)

        let report = try #require(try MovieRepair.repair(path: path))
        let movie = try #require(try contents(path).0)
        #expect(movie.videoFrames == report.videoFrames && movie.videoFrames == 50)
        #expect(movie.audioFrames == report.audioFrames)
        #expect(movie.videoDuration == report.videoDuration)
        #expect(movie.bytes == report.bytes)
        #expect(movie.created == report.created)
    }

    /// At every step of an interrupted close, and cut at any byte, a movie has contents
    /// exactly when repair takes it for complete, and reading them never changes it.
    @Test func contentsOnlyOfWhatRepairTakesForComplete() throws {
        var files: [String] = []
        for step in 1...40 {
            let path = Fixture.directory.file("contents-close-\(step).mov")
            let output = FailingOutput(try FileMovieOutput(creating: path))
            let (writer, open) = try SmallFixture.write(to: output, path: path, close: false)
            output.stop(from: output.operations + step)
            files.append(path)
            do {
                try writer.append(try #require(open))
                try writer.close()
                break
            } catch {
                writer.abandon()
            }
        }
        let complete = try #require(files.last)
        let full = fileBytes(complete)
        for cut in stride(from: 0, through: full.count, by: 7) {
            let path = Fixture.directory.file("contents-cut-\(cut).mov")
            #expect(FileManager.default.createFile(atPath: path, contents: Data(full[0..<cut])))
            files.append(path)
        }
        var completeCount = 0
        for path in files {
            let before = fileBytes(path)
            let state = try? MovieRepair.inspect(path: path)
            let read = try? contents(path)
            #expect(fileBytes(path) == before, "\(path)")
            #expect(read?.changes.isEmpty ?? true, "\(path)")
            let hasContents = read?.0 != nil
            #expect(hasContents == (state == .complete), "\(path): \(String(describing: state))")
            if hasContents { completeCount += 1 }
            try? FileManager.default.removeItem(atPath: path)
        }
        #expect(completeCount == 2)  // the closed movie, and the cut at its very end
    }

    /// Flips each byte of the index: reading must never crash or change the file.
    @Test func corruptedIndexNeverCrashesTheReader() throws {
        let source = try SmallFixture.file("contents-corrupt-source.mov", close: true)
        let full = fileBytes(source)
        #expect(topLevelTypes(source).last == "moov")
        // Where the index (the last box) starts.
        var index = 0
        while true {
            let size = full[index..<index + 4].reduce(0) { $0 << 8 | Int($1) }
            guard index + size < full.count else { break }
            index += size
        }
        let scratch = Fixture.directory.file("contents-corrupt.mov")
        var read = 0
        for i in index..<full.count {
            var bytes = full
            bytes[i] ^= 0xFF
            #expect(FileManager.default.createFile(atPath: scratch, contents: Data(bytes)))
            if (try? contents(scratch).0) != nil { read += 1 }
            #expect(fileBytes(scratch) == bytes)
        }
        #expect(read > 0)
    }

    @Test func whatIsNoMovieIsSaid() throws {
        let text = Fixture.directory.file("contents-notes.txt")
        #expect(FileManager.default.createFile(atPath: text, contents: Data("hello, this is no movie".utf8)))
        #expect(
            throws: MovieRepairError(path: text, problem: "not a QuickTime movie (it does not start with an ftyp box)")
        ) {
            try contents(text)
        }
        let missing = Fixture.directory.file("contents-missing.mov")
        #expect(throws: MovieRepairError(path: missing, problem: "no such file", kind: .noSuchFile)) {
            try contents(missing)
        }
    }
}
