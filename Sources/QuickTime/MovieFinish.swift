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
enum MovieFinish {
    static func finish(
        _ file: any MovieOutput, tracks: [(header: TrackHeader, table: SampleTable)], creationTime: UInt32,
        fragmentBoxes: [HiddenBox], fragmentedHeader: HiddenBox?
    ) throws(FileError) {
        try file.synchronize()
        var moov = ByteWriter(reservingCapacity: 4096 + tracks.reduce(0) { $0 + $1.table.sampleCount * 12 })
        moov.writeMOOV(tracks: tracks, creationTime: creationTime, fragmented: false)
        try file.append(moov.bytes)
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
