import Media

/// A top-level box the finish hides: where it starts, and its first bytes as they are — its
/// header and its first child's header (8 bytes each, or 16 with a 64-bit size) — so that one
/// write turns both types at once, leaving the sizes as they were.
struct HiddenBox: Equatable {
    var offset: UInt64
    var headers: [UInt8]
    /// How long the box's own header is (8, or 16 with a 64-bit size).
    var headerSize: Int
    /// The whole box as it is, when kept: the fragmented header's, so that the finish can
    /// hide it and the fragment right after it in one write.
    var whole: [UInt8]?

    /// From the start of the box's bytes (at least its header and its first child's header);
    /// `whole` when `bytes` is the whole box and should be kept.
    init?(offset: UInt64, bytes: ArraySlice<UInt8>, headerSize: Int, whole: Bool = false) {
        guard bytes.count >= headerSize + 8 else { return nil }
        self.offset = offset
        self.headerSize = headerSize
        headers = Array(bytes.prefix(headerSize + 8))
        self.whole = whole ? Array(bytes) : nil
    }

    /// The bytes that hide it: typed `free`, its first child typed `mark`.
    func hidden(mark: FourCC) -> [UInt8] {
        var bytes = headers
        bytes.replaceSubrange(4..<8, with: FourCC.free.bytes)
        bytes.replaceSubrange((headerSize + 4)..<(headerSize + 8), with: mark.bytes)
        return bytes
    }
}

/// The last step of every movie, whether its writer closes it or repair finishes one that
/// was interrupted: one routine, so that a closed movie and a repaired one are the same bytes.
///
/// 1. Sync: every fragment is durable before anything points at it.
/// 2. Append the complete `moov` (the index of every sample where it already lies) and sync.
/// 3. Hide the fragment boxes, newest first, then the fragmented header, and sync. The
///    header and the first fragment, which lies right after it, are hidden by one write.
///
/// A box is hidden by turning its type into `free` and its first child's type (`mfhd`,
/// `mvhd`) into a mark of Vigil's own, in one write (`FourCC.hiddenFragment`,
/// `.hiddenHeader`): a `free` box that still starts with an `mfhd` or `mvhd` is taken for the
/// box it was by some readers (GPAC turns it back into a `moof` and gives up, VLC reports a
/// hidden `moov`), so nothing in a finished movie looks like one.
///
/// Readers take the first `moov` they find, and give up on a `moof` before any `moov`: no
/// order of single-box writes keeps every sample in sight while the file turns from one movie
/// into the other. This one keeps the file playable at every step: until the header is hidden
/// it is the fragmented movie it was, with its oldest fragments (at least the first) still in
/// it; from the write that hides the header and the first fragment together it is the finished
/// movie. A stop part-way leaves a file repair finishes the same way, with every sample.
///
/// A finish that failed part-way (a full disk) may be run again: `indexAppended` says the
/// `moov` is in the file already, so it is appended once (an append that fails leaves nothing).
enum MovieFinish {
    static func finish(
        _ file: any MovieOutput, tracks: [(header: TrackHeader, table: SampleTable)], creationTime: UInt32,
        fragmentBoxes: [HiddenBox], fragmentedHeader: HiddenBox?, indexAppended: inout Bool
    ) throws(FileError) {
        try file.synchronize()
        if !indexAppended {
            var moov = ByteWriter(reservingCapacity: 4096 + tracks.reduce(0) { $0 + $1.table.sampleCount * 12 })
            moov.writeMOOV(tracks: tracks, creationTime: creationTime, fragmented: false)
            try file.append(moov.bytes)
            indexAppended = true
        }
        try file.synchronize()
        if let header = fragmentedHeader, let whole = header.whole, let first = fragmentBoxes.first,
            first.offset == header.offset + UInt64(whole.count), whole.count <= 1 << 16
        {
            for box in fragmentBoxes.dropFirst().reversed() { try hide(box, in: file, mark: .hiddenFragment) }
            let together =
                header.hidden(mark: .hiddenHeader) + whole[header.headers.count...]
                + first.hidden(mark: .hiddenFragment)
            try file.overwrite(at: header.offset, with: together)
        } else {
            for box in fragmentBoxes.reversed() { try hide(box, in: file, mark: .hiddenFragment) }
            if let header = fragmentedHeader { try hide(header, in: file, mark: .hiddenHeader) }
        }
        try file.synchronize()
    }

    /// Turns `box` into a `free` box whose first child is typed `mark`, in one write.
    static func hide(_ box: HiddenBox, in file: any MovieOutput, mark: FourCC) throws(FileError) {
        try file.overwrite(at: box.offset, with: box.hidden(mark: mark))
    }
}

extension FourCC {
    /// A box whose contents no reader looks at: what the writer hides fragments and the fragmented header as.
    static let free: FourCC = "free"
    static let moof: FourCC = "moof"
    /// What a hidden fragment's first child (its `mfhd`) is typed once the movie is finished.
    static let hiddenFragment: FourCC = "vgmf"
    /// What the hidden fragmented header's first child (its `mvhd`) is typed once the movie is finished.
    static let hiddenHeader: FourCC = "vgmv"
}

/// What a power cut can leave of a hide or a reveal. Each changes a 4-byte box type in place
/// (`free` ↔ `moof`, `moov` → `free`, `mfhd` → `vgmf`, `mvhd` → `vgmv`); when the type straddles a
/// sector boundary the disk writes it as two sectors and may keep either one, leaving a type
/// that is one value's first bytes and the other's last ("foof": a reveal of a fragment whose
/// `f` lay at the end of one sector and `ree` at the start of the next, with only the second
/// sector kept — an exFAT run found it). Such a box is recognised for what it was on its way
/// to or from, and marked torn: repair checks its samples as it does a hidden fragment's, and
/// finishes the movie again, rewriting every type whole.
enum TornType {
    /// A top-level box's type as the finish means it: `free` for a mix of `free` with `moof`
    /// or `moov`, with `torn` set; any other type as it is.
    static func topLevel(_ type: FourCC) -> (type: FourCC, torn: Bool) {
        isTorn(type, between: .free, and: .moof) || isTorn(type, between: .free, and: "moov")
            ? (.free, true) : (type, false)
    }

    /// Whether a box's first child typed `type` is `plain` (`mfhd`, `mvhd`), Vigil's `mark` for
    /// it, or torn between the two (counted as marked); nil when it is none of these. Some
    /// torn types fit both pairs ("vghd"): the caller tells a header from a fragment by what
    /// else the box holds.
    static func child(_ type: FourCC, plain: FourCC, mark: FourCC) -> (marked: Bool, torn: Bool)? {
        if type == plain { return (false, false) }
        if type == mark { return (true, false) }
        return isTorn(type, between: plain, and: mark) ? (true, true) : nil
    }

    /// True when `type` is neither `a` nor `b` but the first 1 to 3 bytes of one followed by
    /// the rest of the other.
    static func isTorn(_ type: FourCC, between a: FourCC, and b: FourCC) -> Bool {
        let t = type.bytes
        let (x, y) = (a.bytes, b.bytes)
        return type != a && type != b
            && (1...3).contains { k in
                t == Array(x[..<k] + y[k...]) || t == Array(y[..<k] + x[k...])
            }
    }
}

/// What the hidden boxes of a movie with a complete index say about its close, box by box:
/// finished when they are all marked, or all unmarked (a movie closed before the mark
/// existed), and none is torn. Some marked and some not is a close stopped part-way; a torn
/// one, a close or a reveal cut by a power failure. Repair and the contents reader decide by
/// the same rule.
struct HidingMarks {
    private var marked = false
    private var unmarked = false
    private var torn = false

    mutating func add(marked: Bool, torn: Bool) {
        if marked { self.marked = true } else { unmarked = true }
        if torn { self.torn = true }
    }

    /// A hidden box's first child's type: counted when it is a fragment's or a header's,
    /// hidden with or without the mark, or torn.
    mutating func add(firstChild type: FourCC, boxTorn: Bool) {
        if let child = TornType.child(type, plain: "mfhd", mark: .hiddenFragment)
            ?? TornType.child(type, plain: "mvhd", mark: .hiddenHeader)
        {
            add(marked: child.marked, torn: boxTorn || child.torn)
        }
    }

    var finished: Bool { !torn && !(marked && unmarked) }
}
