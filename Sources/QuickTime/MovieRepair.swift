import FoundationEssentials
import Media

/// Why a movie file could not be repaired. The file is left as it was.
public struct MovieRepairError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// There is no file at the path.
        case noSuchFile
        /// Reading or writing the file failed (permissions, I/O error, full disk).
        case inputOutput
        /// The file is not a movie repair understands.
        case notRepairable
        /// The recording stopped before its first fragment was complete: the file is empty, or
        /// holds only the start of the movie's header or first fragment. No video to recover.
        case nothingRecorded
        /// A running agent is writing it: left alone.
        case inUse
    }

    public var path: String
    public var problem: String
    public var kind: Kind = .notRepairable

    public var description: String { "\(path): \(problem)" }
}

/// The state a movie file is in.
public enum MovieFileState: Equatable, Sendable {
    /// A normal movie with a complete index: nothing to do.
    case complete
    /// An interrupted recording (or an interrupted close) that `MovieRepair.repair` can finish.
    case interrupted(fragments: Int)
}

/// What a repair did.
public struct MovieRepairReport: Equatable, Sendable {
    /// Fragments whose samples are in the repaired movie.
    public var fragments: Int
    public var videoFrames: Int
    public var audioFrames: Int
    /// Bytes cut from the end: a fragment, or an index, that was only partly written.
    public var discardedBytes: UInt64
    /// How long the repaired movie's video lasts.
    public var videoDuration: Timestamp.Duration = .zero
    /// The repaired file's size.
    public var bytes: UInt64 = 0
    /// The movie's creation time (the wall clock of its first frame), to the second.
    public var created: Date = Date(timeIntervalSince1970: 0)
    /// Fragments at the end that were dropped because their samples did not reach the disk
    /// whole (zeros or stale data after a power cut), and what was wrong with the first.
    public var droppedFragments: Int = 0
    public var dropReason: String?
}

/// Finishes movies whose writer was interrupted — killed, or cut off by a power failure —
/// while recording or while closing.
///
/// It reads the fragmented movie's header (`moov` with `mvex`) and every complete
/// `moof`+`mdat` pair (including fragments a close had already hidden as `free`), drops a
/// partly written tail, appends a complete `moov` that indexes the samples where they lie,
/// and hides the fragment boxes as `free` — the same result `MovieWriter.close()` gives.
/// Everything is parsed and checked before the file is touched: a file it does not
/// understand is left as it was. Repairing a complete movie changes nothing.
public enum MovieRepair {
    /// Opens a movie file by path for reading and patching (`FileMovieOutput(updating:)` from
    /// `Storage`, which also gives `inspect(path:)` and `repair(path:)` that pass it).
    public typealias Opener = (String) throws(FileError) -> any MovieFile

    /// Tells whether `path` is complete or needs repair, without changing it.
    public static func inspect(path: String, opening opener: Opener) throws(MovieRepairError) -> MovieFileState {
        let file = try open(path, opener)
        defer { try? file.close() }
        let plan = try makePlan(file, path: path)
        return plan == nil ? .complete : .interrupted(fragments: plan!.fragments.count)
    }

    /// Turns the interrupted movie at `path` into a normal one. Returns nil when it already was.
    @discardableResult
    public static func repair(path: String, opening opener: Opener) throws(MovieRepairError) -> MovieRepairReport? {
        let file = try open(path, opener)
        defer { try? file.close() }
        guard let plan = try makePlan(file, path: path) else { return nil }

        do {
            if file.length != plan.keepLength { try file.truncate(to: plan.keepLength) }
            var indexAppended = false
            try MovieFinish.finish(
                file, tracks: plan.tracks, creationTime: plan.creationTime,
                fragmentBoxes: plan.fragmentBoxes, fragmentedHeader: plan.header, indexAppended: &indexAppended)
        } catch {
            throw MovieRepairError(
                path: path,
                problem:
                    "\(error.description) — the file is still an interrupted movie; free some space or fix the disk and repair it again",
                kind: .inputOutput)
        }
        let videoTrack = plan.tracks.first { $0.header.kind == .video }
        let video = videoTrack?.table.sampleCount ?? 0
        let audio = plan.tracks.first { $0.header.kind == .audio }?.table.sampleCount ?? 0
        let videoDuration =
            videoTrack.map { duration(ticks: $0.table.mediaDuration, timescale: $0.header.timescale) } ?? .zero
        return MovieRepairReport(
            fragments: plan.fragments.count, videoFrames: video, audioFrames: audio,
            discardedBytes: plan.originalLength - plan.keepLength, videoDuration: videoDuration, bytes: file.length,
            created: date(fromQuickTimeSeconds: plan.creationTime),
            droppedFragments: plan.droppedFragments, dropReason: plan.dropReason)
    }

    // MARK: Planning

    struct Plan {
        var tracks: [(header: TrackHeader, table: SampleTable)]
        var creationTime: UInt32
        var fragments: [TopLevelBox]
        /// The fragments kept, and the fragmented header: what the finish hides (again, for
        /// those already hidden: a mark of our own replaces their first child's type).
        var fragmentBoxes: [HiddenBox]
        var header: HiddenBox
        var keepLength: UInt64
        var originalLength: UInt64
        /// Fragments at the end dropped because they did not reach the disk whole, and why.
        var droppedFragments: Int
        var dropReason: String?
    }

    struct Fragment {
        var moof: TopLevelBox
        var bytes: [UInt8]
        /// Still typed `moof` (not hidden).
        var live: Bool
        /// Hidden with Vigil's mark as its first child's type (by a close or a repair).
        var marked: Bool
        /// Its type or its first child's torn between two values by a power cut (`TornType`).
        var torn: Bool
        var mdat: TopLevelBox
        /// Its header and its first child's, to hide it by.
        var hidden: HiddenBox
    }

    struct TopLevelBox: Equatable {
        var offset: UInt64
        var size: UInt64
        var headerSize: Int
        var type: FourCC
        var end: UInt64 { offset + size }
    }

    static func open(
        _ path: String, _ opener: Opener, purpose: String = "for repair"
    ) throws(MovieRepairError) -> any MovieFile {
        do { return try opener(path) } catch {
            if error.isMissing { throw MovieRepairError(path: path, problem: "no such file", kind: .noSuchFile) }
            if error.isInUse {
                throw MovieRepairError(
                    path: path, problem: "a running agent is writing it; left as it is", kind: .inUse)
            }
            if error.isNotRegularFile {
                throw MovieRepairError(path: path, problem: error.reason, kind: .notRepairable)
            }
            throw MovieRepairError(
                path: path, problem: "cannot open it \(purpose): \(error.reason)", kind: .inputOutput)
        }
    }

    /// The whole of a top-level box (a header, an index, a fragment), at most 64 MB of it.
    static func readBox(_ box: TopLevelBox, of file: any MovieFile, path: String) throws(MovieRepairError) -> [UInt8] {
        guard box.size <= 64 << 20 else {
            throw MovieRepairError(
                path: path, problem: "its \(box.type) box of \(box.size) bytes is too large to be a movie header")
        }
        do { return try file.read(at: box.offset, count: Int(box.size)) } catch {
            throw MovieRepairError(path: path, problem: "cannot read it: \(error.reason)", kind: .inputOutput)
        }
    }

    /// The creation time of a movie header (`mvhd`, version 0) found in `range` of `bytes`.
    /// The `mvhd` of a hidden header carries Vigil's mark as its type (or, torn by a power
    /// cut, a mix of the two: `TornType`).
    static func creationTime(ofMovieIn bytes: [UInt8], range: Range<Int>) -> UInt32? {
        guard
            let mvhd = childBoxes(of: bytes, in: range)?.first(where: {
                TornType.child($0.type, plain: "mvhd", mark: .hiddenHeader) != nil
            })
        else { return nil }
        var r = ByteReader(bytes, range: mvhd.body)
        guard let version = r.readVersionAndFlags()?.version, version == 0 else { return nil }
        return r.readUInt32()
    }

    /// How long `ticks` of a track's media time scale last.
    static func duration(ticks: UInt64, timescale: UInt32) -> Timestamp.Duration {
        Timestamp.Duration(
            nanoseconds: Rational.scale(Int64(clamping: ticks), by: 1_000_000_000, over: Int64(max(1, timescale))))
    }

    /// The boxes at the top level of the file, and where a partly written tail begins (if any).
    static func scanTopLevel(_ file: any MovieFile) throws(FileError) -> (boxes: [TopLevelBox], tail: UInt64?) {
        var boxes: [TopLevelBox] = []
        var offset: UInt64 = 0
        let length = file.length
        while offset < length {
            let head = try file.read(at: offset, count: 16)
            var r = ByteReader(head)
            guard let size32 = r.readUInt32(), let typeValue = r.readUInt32() else { return (boxes, offset) }
            let type = FourCC(bigEndian: typeValue)
            var size = UInt64(size32)
            var headerSize = 8
            if size32 == 1 {
                guard let large = r.readUInt64() else { return (boxes, offset) }
                size = large
                headerSize = 16
            } else if size32 == 0 {
                size = length - offset
            }
            guard type.isPrintable, size >= UInt64(headerSize), size <= length - offset else { return (boxes, offset) }
            boxes.append(TopLevelBox(offset: offset, size: size, headerSize: headerSize, type: type))
            offset += size
        }
        return (boxes, nil)
    }

    /// Whether every byte of `file` is zero (read in 1 MB pieces, stopping at the first that is not).
    static func isAllZero(_ file: any MovieFile, path: String) throws(MovieRepairError) -> Bool {
        var offset: UInt64 = 0
        while offset < file.length {
            let count = Int(min(UInt64(1 << 20), file.length - offset))
            let bytes: [UInt8]
            do { bytes = try file.read(at: offset, count: count) } catch {
                throw MovieRepairError(path: path, problem: "cannot read it: \(error.reason)", kind: .inputOutput)
            }
            guard !bytes.isEmpty, bytes.allSatisfy({ $0 == 0 }) else { return false }
            offset += UInt64(bytes.count)
        }
        return true
    }

    /// Works out everything a repair would write; nil when the movie is already complete.
    static func makePlan(_ file: any MovieFile, path: String) throws(MovieRepairError) -> Plan? {
        func fail(_ problem: String) -> MovieRepairError { MovieRepairError(path: path, problem: problem) }
        func nothing(_ problem: String) -> MovieRepairError {
            MovieRepairError(path: path, problem: problem, kind: .nothingRecorded)
        }
        func readBody(_ box: TopLevelBox) throws(MovieRepairError) -> [UInt8] {
            try readBox(box, of: file, path: path)
        }

        let scan: (boxes: [TopLevelBox], tail: UInt64?)
        do { scan = try scanTopLevel(file) } catch {
            throw MovieRepairError(path: path, problem: "cannot read it: \(error.reason)", kind: .inputOutput)
        }
        let boxes = scan.boxes
        guard let first = boxes.first, first.type == "ftyp" else {
            if file.length == 0 {
                throw nothing("the file is empty: recording stopped before anything was written; nothing to recover")
            }
            // Cut inside the file type box, the first bytes Vigil writes.
            var ftyp = ByteWriter()
            ftyp.writeFTYP()
            if file.length < UInt64(ftyp.count), let bytes = try? file.read(at: 0, count: Int(file.length)),
                ftyp.bytes.starts(with: bytes)
            {
                throw nothing("only the first \(file.length) bytes of the movie were written; nothing to recover")
            }
            // A power cut on FAT or exFAT can keep a file's length and lose its data: none of
            // it was synced yet, and the file system wrote the size first. Zeros only: nothing
            // of the movie ever reached the disk.
            if try isAllZero(file, path: path) {
                throw nothing(
                    "its \(file.length) bytes are all zero: the file system kept its length, not its data (none of it was synced before the power cut); nothing to recover"
                )
            }
            throw fail("not a QuickTime movie (it does not start with an ftyp box)")
        }

        // Classify every box. Fragments and the fragmented header may be hidden as `free`
        // boxes: a fragment written but not yet revealed, or hidden by an interrupted close
        // (its first child still `mfhd` or `mvhd`, or already Vigil's mark): recognise them by
        // their contents. The first thing that is not part of the movie ends it: what follows
        // is the tail a kill or a power cut left, unless a live fragment or the index follows
        // it — damage in the middle of a file is not what an interrupted recording leaves.
        var header: (box: TopLevelBox, bytes: [UInt8], live: Bool, marked: Bool, torn: Bool, hidden: HiddenBox)?
        var index: TopLevelBox?
        var fragments: [Fragment] = []
        var damage: (offset: UInt64, problem: String)?
        var lastKept: UInt64 = first.end
        let rest = Array(boxes.dropFirst())
        var i = 0
        while i < rest.count {
            let box = rest[i]
            i += 1
            if let damage {
                if box.type == "moov" || box.type == "moof" {
                    throw fail(
                        "\(damage.problem) at offset \(damage.offset), and a \(box.type) box follows at offset \(box.offset); this is not what an interrupted recording leaves"
                    )
                }
                continue
            }
            let (type, tornType) = TornType.topLevel(box.type)
            switch type {
            case "moov":
                let bytes = try readBody(box)
                if findBox(["mvex"], in: bytes, range: box.headerSize..<bytes.count) != nil {
                    guard header == nil else { throw fail("it has two fragmented movie headers") }
                    guard
                        let hidden = HiddenBox(
                            offset: box.offset, bytes: bytes[...], headerSize: box.headerSize, whole: true)
                    else {
                        throw fail("its movie header at offset \(box.offset) is empty")
                    }
                    header = (box, bytes, true, false, false, hidden)
                    lastKept = box.end
                } else {
                    index = box
                }
            case "moof", "free", "skip":
                guard box.size <= 64 << 20 else { continue }
                let bytes = try readBody(box)
                let childType = childBoxes(of: bytes, in: box.headerSize..<bytes.count)?.first?.type ?? "????"
                let live = type == "moof"
                let hasMovieExtends = findBox(["mvex"], in: bytes, range: box.headerSize..<bytes.count) != nil
                let asFragment = TornType.child(childType, plain: "mfhd", mark: .hiddenFragment)
                let asHeader = TornType.child(childType, plain: "mvhd", mark: .hiddenHeader)
                if live || (!hasMovieExtends && asFragment != nil) {
                    if index != nil {
                        throw fail("a fragment follows the movie index; this is not a layout Vigil writes")
                    }
                    guard i < rest.count, rest[i].type == "mdat",
                        let hidden = HiddenBox(offset: box.offset, bytes: bytes[...], headerSize: box.headerSize)
                    else {
                        if header != nil { damage = (box.offset, "a fragment without its media data") }
                        continue
                    }
                    fragments.append(
                        Fragment(
                            moof: box, bytes: bytes, live: live, marked: asFragment?.marked == true,
                            torn: tornType || asFragment?.torn == true, mdat: rest[i], hidden: hidden))
                    i += 1
                } else if let asHeader, hasMovieExtends, header == nil,
                    let hidden = HiddenBox(
                        offset: box.offset, bytes: bytes[...], headerSize: box.headerSize, whole: true)
                {
                    header = (box, bytes, false, asHeader.marked, tornType || asHeader.torn, hidden)
                    lastKept = box.end
                }
            case "mdat":
                if index == nil && header != nil { damage = (box.offset, "media data that belongs to no fragment") }
            default:
                if header != nil && index == nil { damage = (box.offset, "an unexpected \(box.type) box") }
            }
        }
        // A fragment whose mdat never made it to disk is part of the partial tail.
        let partialTail: UInt64? = damage?.offset ?? scan.tail

        // Finished: the index is there and every box is hidden, as `HidingMarks` says.
        let liveFragments = fragments.filter(\.live)
        var marks = HidingMarks()
        for fragment in fragments { marks.add(marked: fragment.marked, torn: fragment.torn) }
        if let header { marks.add(marked: header.marked, torn: header.torn) }
        if let index, header?.live != true, liveFragments.isEmpty, marks.finished {
            // Complete. Only a stray partial tail after the index would need cutting, and a
            // complete movie never has one: treat it as not ours to touch.
            guard partialTail == nil || partialTail! >= index.end else {
                throw fail("its index is followed by unreadable data at offset \(partialTail!)")
            }
            return nil
        }
        guard let header else {
            // Only the file type and the start of the first write: Vigil's, cut short. With
            // more boxes than that, it is some other movie.
            let problem = "no movie header: recording stopped before its first fragment was written; nothing to recover"
            throw boxes.count == 1 ? nothing(problem) : fail(problem)
        }
        guard !fragments.isEmpty else {
            let problem =
                "no complete fragment: recording stopped before its first second was written; nothing to recover"
            // The header, and at most the start of the first fragment after it.
            let onlyTheFirstWrite =
                index == nil && (boxes.count == 2 || (boxes.count == 3 && damage?.offset == boxes[2].offset))
            throw onlyTheFirstWrite ? nothing(problem) : fail(problem)
        }

        // Tracks from the header, samples from the fragments.
        let headerBody = header.box.headerSize..<header.bytes.count
        guard let creationTime = creationTime(ofMovieIn: header.bytes, range: headerBody) else {
            throw fail("its movie header has no mvhd of version 0")
        }
        guard let trakBoxes = childBoxes(of: header.bytes, in: headerBody)?.filter({ $0.type == "trak" }),
            !trakBoxes.isEmpty
        else {
            throw fail("its movie header has no tracks")
        }
        var tracks: [(header: TrackHeader, table: SampleTable, bytesPerFrame: Int)] = []
        for trak in trakBoxes {
            guard let track = parseTrack(header.bytes, trak) else {
                throw fail(
                    "cannot read the track at offset \(header.box.offset + UInt64(trak.range.lowerBound)) of its movie header"
                )
            }
            tracks.append(track)
        }

        // Fragments in order, each checked whole before it is taken: its runs must lie inside
        // its media data, and its video samples must be whole H.264 (a fragment a power cut
        // left zero-filled or stale fails this). The first one that fails begins the tail.
        var firstAudioTime: [UInt32: UInt64] = [:]
        var accepted = 0
        var dropped: (offset: UInt64, problem: String)?
        for (k, fragment) in fragments.enumerated() {
            let runs: [(run: TrackRun, track: Int)]
            do { runs = try checkFragment(fragment, tracks: tracks, file: file) } catch {
                let problem = "the fragment at offset \(fragment.moof.offset) \(error.problem)"
                if index != nil || fragments[(k + 1)...].contains(where: \.live) {
                    throw fail(
                        "\(problem), and complete fragments follow it; this is not what an interrupted recording leaves"
                    )
                }
                if k == 0 {
                    // Nothing whole to keep: leave the file as it is. A lone fragment that never
                    // reached the disk (a power cut during the first second) is nothing recorded.
                    let problem = "\(problem); no fragment to recover"
                    throw fragments.count == 1 && !fragment.live && error.payloadMissing
                        ? nothing(problem) : fail(problem)
                }
                dropped = (fragment.moof.offset, problem)
                break
            }
            accepted += 1
            lastKept = fragment.mdat.end
            for (run, t) in runs {
                switch tracks[t].header.kind {
                case .video:
                    // A fragment that starts after the video so far (GOPs dropped while the
                    // disk fell behind): the frame before the gap stays on screen through it.
                    let sofar = tracks[t].table.mediaDuration
                    if run.baseMediaDecodeTime > sofar, tracks[t].table.sampleCount > 0 {
                        tracks[t].table.extendLastDuration(by: UInt32(clamping: run.baseMediaDecodeTime - sofar))
                    }
                    tracks[t].table.appendVideoChunk(
                        offset: run.dataOffset, samples: run.samples.map { ($0.size, $0.duration, $0.isSync) })
                case .audio:
                    if firstAudioTime[run.trackID] == nil { firstAudioTime[run.trackID] = run.baseMediaDecodeTime }
                    let frames = run.samples.reduce(0) { $0 + Int($1.duration) }
                    tracks[t].table.appendAudio(
                        offset: run.dataOffset, frames: frames, sampleRate: Int(tracks[t].header.timescale))
                }
            }
        }
        let kept = fragments.prefix(accepted)
        for i in tracks.indices where tracks[i].header.kind == .audio {
            let start = Int64(clamping: firstAudioTime[tracks[i].header.trackID] ?? 0)
            tracks[i].header.startDelay = UInt64(
                max(0, Rational.scale(start, by: TimeScale.movie, over: Int64(tracks[i].header.timescale))))
        }
        let finalTracks = tracks.filter { $0.table.sampleCount > 0 }.map { ($0.header, $0.table) }
        guard finalTracks.contains(where: { $0.0.kind == .video }) else {
            throw fail("its fragments hold no video samples; nothing to recover")
        }
        return Plan(
            tracks: finalTracks, creationTime: creationTime,
            fragments: kept.map(\.moof),
            fragmentBoxes: kept.map(\.hidden), header: header.hidden,
            keepLength: lastKept, originalLength: file.length,
            droppedFragments: fragments.count - accepted, dropReason: dropped?.problem ?? damage?.problem)
    }
}
