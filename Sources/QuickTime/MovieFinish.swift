import Media

/// The last step of every movie, whether its writer closes it or repair finishes one that
/// was interrupted: one routine, so that a closed movie and a repaired one are the same bytes.
///
/// 1. Sync: every fragment is durable before anything points at it.
/// 2. Append the complete `moov` (the index of every sample where it already lies) and sync.
/// 3. Hide the fragment boxes (`moof` → `free`), newest first, then the fragmented header
///    (`moov` → `free`), and sync. Until the header is hidden the file still opens as the
///    fragmented movie it was; a stop part-way leaves a file repair finishes the same way.
enum MovieFinish {
    static func finish(
        _ file: any MovieOutput, tracks: [(header: TrackHeader, table: SampleTable)], creationTime: UInt32,
        fragmentBoxes: [UInt64], fragmentedHeader: UInt64?
    ) throws(FileError) {
        try file.synchronize()
        var moov = ByteWriter(reservingCapacity: 4096 + tracks.reduce(0) { $0 + $1.table.sampleCount * 12 })
        moov.writeMOOV(tracks: tracks, creationTime: creationTime, fragmented: false)
        try file.append(moov.bytes)
        try file.synchronize()
        for offset in fragmentBoxes.reversed() { try file.overwrite(at: offset + 4, with: FourCC.free.bytes) }
        if let header = fragmentedHeader { try file.overwrite(at: header + 4, with: FourCC.free.bytes) }
        try file.synchronize()
    }
}

extension FourCC {
    /// A box whose contents no reader looks at: what the writer hides fragments and the fragmented header as.
    static let free: FourCC = "free"
    static let moof: FourCC = "moof"
}
