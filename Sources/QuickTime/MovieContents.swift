import FoundationEssentials
import Media

/// What a complete movie holds, as its index says: what the events journal's line for it
/// says when the line is rebuilt from the file.
public struct MovieContents: Equatable, Sendable {
    /// The movie's creation time (the wall clock of its first frame), to the second.
    public var created: Date
    /// How long the video track lasts.
    public var videoDuration: Timestamp.Duration
    public var videoFrames: Int
    /// Sound sample frames (0 without a sound track).
    public var audioFrames: Int
    /// The file's size.
    public var bytes: UInt64

    public init(created: Date, videoDuration: Timestamp.Duration, videoFrames: Int, audioFrames: Int, bytes: UInt64) {
        self.created = created
        self.videoDuration = videoDuration
        self.videoFrames = videoFrames
        self.audioFrames = audioFrames
        self.bytes = bytes
    }
}

extension MovieRepair {
    /// Reads what the complete movie at `path` holds from its index — the creation time of
    /// its `mvhd`, and each track's time scale (`mdhd`) and samples (`stts`) — with the reader
    /// repair uses, and only reads: the file is not changed. Only the top-level box headers
    /// and the index are read, never the media.
    ///
    /// Nil when the movie is not complete: a recording still being written, or one that was
    /// interrupted (`repair` finishes it). Throws when the file cannot be read or is not a
    /// movie Vigil writes.
    public static func contents(path: String, opening opener: Opener) throws(MovieRepairError) -> MovieContents? {
        let file = try open(path, opener, purpose: "to read it")
        defer { try? file.close() }
        func fail(_ problem: String) -> MovieRepairError { MovieRepairError(path: path, problem: problem) }

        let scan: (boxes: [TopLevelBox], tail: UInt64?)
        do { scan = try scanTopLevel(file) } catch {
            throw MovieRepairError(path: path, problem: "cannot read it: \(error.reason)", kind: .inputOutput)
        }
        guard scan.boxes.first?.type == "ftyp" else {
            throw fail("not a QuickTime movie (it does not start with an ftyp box)")
        }
        // A live fragment, a live fragmented header, or a partly written tail: not finished.
        var index: (box: TopLevelBox, bytes: [UInt8])?
        for box in scan.boxes where box.type == "moov" || box.type == "moof" {
            guard box.type == "moov" else { return nil }
            let bytes = try readBox(box, of: file, path: path)
            if findBox(["mvex"], in: bytes, range: box.headerSize..<bytes.count) != nil { return nil }
            index = (box, bytes)
        }
        guard let index else { return nil }
        // Hidden boxes partly marked, or torn by a power cut: a close stopped part-way
        // (repair finishes it).
        var marks = HidingMarks()
        for box in scan.boxes where box.size >= UInt64(box.headerSize + 8) {
            let (type, torn) = TornType.topLevel(box.type)
            guard type == .free else { continue }
            let child: [UInt8]
            do { child = try file.read(at: box.offset + UInt64(box.headerSize) + 4, count: 4) } catch {
                throw MovieRepairError(path: path, problem: "cannot read it: \(error.reason)", kind: .inputOutput)
            }
            marks.add(firstChild: FourCC(bigEndian: child.reduce(0) { $0 << 8 | UInt32($1) }), boxTorn: torn)
        }
        if !marks.finished { return nil }
        guard scan.tail == nil else { throw fail("its index is followed by unreadable data at offset \(scan.tail!)") }

        let body = index.box.headerSize..<index.bytes.count
        guard let creationTime = creationTime(ofMovieIn: index.bytes, range: body) else {
            throw fail("its movie index has no mvhd of version 0")
        }
        var video: (ticks: UInt64, timescale: UInt32, samples: Int)?
        var audioFrames = 0
        for trak in childBoxes(of: index.bytes, in: body)?.filter({ $0.type == "trak" }) ?? [] {
            guard let track = parseTrack(index.bytes, trak),
                let stts = findBox(["mdia", "minf", "stbl", "stts"], in: index.bytes, range: trak.body),
                let (samples, ticks) = timeToSampleTotals(index.bytes, stts)
            else {
                throw fail(
                    "cannot read the track at offset \(index.box.offset + UInt64(trak.range.lowerBound)) of its movie index"
                )
            }
            switch track.header.kind {
            case .video where video == nil: video = (ticks, track.header.timescale, samples)
            case .audio where audioFrames == 0: audioFrames = samples  // PCM: a sample is a frame
            case .video, .audio: break
            }
        }
        guard let video else { throw fail("its movie index has no video track") }
        return MovieContents(
            created: date(fromQuickTimeSeconds: creationTime),
            videoDuration: duration(ticks: video.ticks, timescale: video.timescale),
            videoFrames: video.samples, audioFrames: audioFrames, bytes: file.length)
    }

    /// The number of samples a `stts` box describes and their total duration; nil when it is malformed.
    private static func timeToSampleTotals(_ bytes: [UInt8], _ stts: ChildBox) -> (samples: Int, ticks: UInt64)? {
        var r = ByteReader(bytes, range: stts.body)
        guard r.readVersionAndFlags() != nil, let count = r.readUInt32(), Int(count) <= r.remaining / 8 else {
            return nil
        }
        var samples = 0
        var ticks: UInt64 = 0
        for _ in 0..<count {
            guard let n = r.readUInt32(), let duration = r.readUInt32() else { return nil }
            let (sum, overflow) = ticks.addingReportingOverflow(UInt64(n) * UInt64(duration))
            guard !overflow else { return nil }
            samples += Int(n)
            ticks = sum
        }
        return (samples, ticks)
    }
}
