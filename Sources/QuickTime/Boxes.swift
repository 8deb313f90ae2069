import Media

// One writer function per box, named after the box, composed the way the boxes nest
// (FFmpeg's movenc.c is the model for the organisation). All integers are big-endian.

extension ByteWriter {
    // MARK: File level

    mutating func writeFTYP() {
        box("ftyp") { w in
            w.writeFourCC("qt  ")  // major brand
            w.writeUInt32(0x0000_0200)  // minor version
            w.writeFourCC("qt  ")  // compatible brands
        }
    }

    /// An `mdat` header for `payloadSize` bytes that follow it (the 64-bit form when needed).
    mutating func writeMDATHeader(payloadSize: UInt64) {
        if payloadSize + 8 <= UInt64(UInt32.max) {
            writeUInt32(UInt32(payloadSize + 8))
            writeFourCC("mdat")
        } else {
            writeUInt32(1)
            writeFourCC("mdat")
            writeUInt64(payloadSize + 16)
        }
    }

    // MARK: Movie

    /// The movie: header, tracks, and for a fragmented movie the `mvex` that announces fragments.
    mutating func writeMOOV(tracks: [(header: TrackHeader, table: SampleTable)], creationTime: UInt32, fragmented: Bool)
    {
        box("moov") { w in
            let durations = tracks.map { movieDuration(of: $0.header, $0.table) }
            w.writeMVHD(
                creationTime: creationTime, duration: durations.max() ?? 0,
                nextTrackID: (tracks.map(\.header.trackID).max() ?? 0) + 1)
            for (track, duration) in zip(tracks, durations) {
                w.writeTRAK(track.header, track.table, creationTime: creationTime, movieDuration: duration)
            }
            if fragmented { w.writeMVEX(trackIDs: tracks.map(\.header.trackID)) }
        }
    }

    mutating func writeMVHD(creationTime: UInt32, duration: UInt64, nextTrackID: UInt32) {
        fullBox("mvhd") { w in
            w.writeUInt32(creationTime)
            w.writeUInt32(creationTime)  // modification time
            w.writeUInt32(UInt32(TimeScale.movie))
            w.writeUInt32(UInt32(clamping: duration))
            w.writeFixed16_16(1)  // preferred rate
            w.writeFixed8_8(1)  // preferred volume
            w.writeZeros(10)  // reserved
            w.writeMatrix(TrackHeader.identityMatrix)
            w.writeZeros(24)  // preview, poster, selection, current time
            w.writeUInt32(nextTrackID)
        }
    }

    mutating func writeMatrix(_ m: [Int32]) {
        precondition(m.count == 9, "a transform matrix has nine values")
        for v in m { writeInt32(v) }
    }

    // MARK: Track

    mutating func writeTRAK(_ header: TrackHeader, _ table: SampleTable, creationTime: UInt32, movieDuration: UInt64) {
        box("trak") { w in
            w.writeTKHD(header, creationTime: creationTime, duration: movieDuration)
            if header.startDelay > 0 {
                w.writeEDTS(emptyDuration: header.startDelay, mediaDuration: movieDuration - header.startDelay)
            }
            w.writeMDIA(header, table, creationTime: creationTime)
        }
    }

    mutating func writeTKHD(_ header: TrackHeader, creationTime: UInt32, duration: UInt64) {
        // Flags: track enabled (1), used in the movie (2).
        fullBox("tkhd", flags: 0x3) { w in
            w.writeUInt32(creationTime)
            w.writeUInt32(creationTime)
            w.writeUInt32(header.trackID)
            w.writeUInt32(0)  // reserved
            w.writeUInt32(UInt32(clamping: duration))
            w.writeZeros(8)  // reserved
            w.writeUInt16(0)  // layer
            w.writeUInt16(0)  // alternate group
            w.writeFixed8_8(header.kind == .audio ? 1 : 0)  // volume
            w.writeUInt16(0)  // reserved
            w.writeMatrix(header.matrix)
            w.writeUInt32(header.width)
            w.writeUInt32(header.height)
        }
    }

    /// An edit list that delays the track by `emptyDuration`, then plays its media from the start.
    mutating func writeEDTS(emptyDuration: UInt64, mediaDuration: UInt64) {
        box("edts") { w in
            w.fullBox("elst") { w in
                w.writeUInt32(2)
                w.writeELSTEntry(duration: emptyDuration, mediaTime: -1)
                w.writeELSTEntry(duration: mediaDuration, mediaTime: 0)
            }
        }
    }

    mutating func writeELSTEntry(duration: UInt64, mediaTime: Int32) {
        writeUInt32(UInt32(clamping: duration))
        writeInt32(mediaTime)
        writeFixed16_16(1)  // media rate
    }

    mutating func writeMDIA(_ header: TrackHeader, _ table: SampleTable, creationTime: UInt32) {
        box("mdia") { w in
            w.writeMDHD(timescale: header.timescale, duration: table.mediaDuration, creationTime: creationTime)
            switch header.kind {
            case .video: w.writeHDLR(componentType: "mhlr", subtype: "vide", name: "VideoHandler")
            case .audio: w.writeHDLR(componentType: "mhlr", subtype: "soun", name: "SoundHandler")
            }
            w.writeMINF(header, table)
        }
    }

    mutating func writeMDHD(timescale: UInt32, duration: UInt64, creationTime: UInt32) {
        fullBox("mdhd") { w in
            w.writeUInt32(creationTime)
            w.writeUInt32(creationTime)
            w.writeUInt32(timescale)
            w.writeUInt32(UInt32(clamping: duration))
            w.writeUInt16(0x55C4)  // language: ISO 639-2 "und", packed
            w.writeUInt16(0)  // quality
        }
    }

    /// A QuickTime handler reference: component type, subtype, and a Pascal-string name.
    mutating func writeHDLR(componentType: FourCC, subtype: FourCC, name: String) {
        fullBox("hdlr") { w in
            w.writeFourCC(componentType)
            w.writeFourCC(subtype)
            w.writeZeros(12)  // manufacturer, flags, flags mask
            w.writePascalString(name)
        }
    }

    mutating func writeMINF(_ header: TrackHeader, _ table: SampleTable) {
        box("minf") { w in
            switch header.kind {
            case .video: w.writeVMHD()
            case .audio: w.writeSMHD()
            }
            w.writeHDLR(componentType: "dhlr", subtype: "url ", name: "DataHandler")
            w.writeDINF()
            w.writeSTBL(header, table)
        }
    }

    mutating func writeVMHD() {
        fullBox("vmhd", flags: 1) { w in
            w.writeUInt16(0)  // graphics mode: copy
            w.writeZeros(6)  // opcolor
        }
    }

    mutating func writeSMHD() {
        fullBox("smhd") { w in
            w.writeInt16(0)  // balance
            w.writeUInt16(0)  // reserved
        }
    }

    mutating func writeDINF() {
        box("dinf") { w in
            w.fullBox("dref") { w in
                w.writeUInt32(1)
                w.fullBox("url ", flags: 1) { _ in }  // self-contained: the data is in this file
            }
        }
    }

    // MARK: Sample table

    mutating func writeSTBL(_ header: TrackHeader, _ table: SampleTable) {
        box("stbl") { w in
            w.writeSTSD(entry: header.sampleEntry)
            w.writeSTTS(table.timeToSample)
            if !table.allSamplesAreSync { w.writeSTSS(table.syncSamples ?? []) }
            w.writeSTSC(table.sampleToChunkRuns)
            w.writeSTSZ(table.sizes)
            if table.needs64BitOffsets {
                w.writeCO64(table.chunks.map(\.offset))
            } else {
                w.writeSTCO(table.chunks.map { UInt32($0.offset) })
            }
        }
    }

    mutating func writeSTSD(entry: [UInt8]) {
        fullBox("stsd") { w in
            w.writeUInt32(1)
            w.writeBytes(entry)
        }
    }

    mutating func writeSTTS(_ entries: [SampleTable.TimeToSample]) {
        fullBox("stts") { w in
            w.writeUInt32(UInt32(entries.count))
            for e in entries {
                w.writeUInt32(e.count)
                w.writeUInt32(e.duration)
            }
        }
    }

    mutating func writeSTSS(_ syncSamples: [UInt32]) {
        fullBox("stss") { w in
            w.writeUInt32(UInt32(syncSamples.count))
            for n in syncSamples { w.writeUInt32(n) }
        }
    }

    mutating func writeSTSC(_ runs: [(firstChunk: UInt32, samplesPerChunk: UInt32)]) {
        fullBox("stsc") { w in
            w.writeUInt32(UInt32(runs.count))
            for run in runs {
                w.writeUInt32(run.firstChunk)
                w.writeUInt32(run.samplesPerChunk)
                w.writeUInt32(1)  // sample description index
            }
        }
    }

    mutating func writeSTSZ(_ sizes: SampleTable.Sizes) {
        fullBox("stsz") { w in
            switch sizes {
            case .constant(let size, let count):
                w.writeUInt32(size)
                w.writeUInt32(count)
            case .variable(let sizes):
                w.writeUInt32(0)
                w.writeUInt32(UInt32(sizes.count))
                for s in sizes { w.writeUInt32(s) }
            }
        }
    }

    mutating func writeSTCO(_ offsets: [UInt32]) {
        fullBox("stco") { w in
            w.writeUInt32(UInt32(offsets.count))
            for o in offsets { w.writeUInt32(o) }
        }
    }

    mutating func writeCO64(_ offsets: [UInt64]) {
        fullBox("co64") { w in
            w.writeUInt32(UInt32(offsets.count))
            for o in offsets { w.writeUInt64(o) }
        }
    }

    // MARK: Sample descriptions

    /// What every sample description (`avc1`, `sowt`) starts with: six reserved bytes, the data
    /// reference index (1, the file itself), then version 0, revision level 0 and no vendor.
    mutating func writeSampleEntryStart() {
        writeZeros(6)  // reserved
        writeUInt16(1)  // data reference index
        writeUInt16(0)  // version
        writeUInt16(0)  // revision level
        writeUInt32(0)  // vendor
    }

    /// The `avc1` sample entry with its `avcC`, and `colr`, `pasp`, `clap` when given.
    mutating func writeAVC1(_ video: VideoTrackFormat) {
        box("avc1") { w in
            w.writeSampleEntryStart()
            w.writeUInt32(0)  // temporal quality
            w.writeUInt32(0x200)  // spatial quality: normal
            w.writeUInt16(UInt16(clamping: video.width))
            w.writeUInt16(UInt16(clamping: video.height))
            w.writeFixed16_16(72)  // horizontal resolution, dpi
            w.writeFixed16_16(72)  // vertical resolution, dpi
            w.writeUInt32(0)  // data size
            w.writeUInt16(1)  // frames per sample
            w.writePascalString("H.264", paddedTo: 32)  // compressor name
            w.writeUInt16(0x18)  // depth: colour, no alpha
            w.writeInt16(-1)  // colour table id: none
            w.writeAVCC(sps: video.sequenceParameterSet, pps: video.pictureParameterSet)
            if let color = video.color { w.writeCOLR(color) }
            if let aspect = video.pixelAspectRatio { w.writePASP(aspect) }
            if let aperture = video.cleanAperture { w.writeCLAP(aperture) }
        }
    }

    /// The decoder configuration record (ISO/IEC 14496-15): profile, compatibility and level
    /// from the SPS, 4-byte NAL lengths, one SPS and one PPS; for High profiles the chroma
    /// format and bit depths read from the SPS.
    mutating func writeAVCC(sps: [UInt8], pps: [UInt8]) {
        box("avcC") { w in
            w.writeUInt8(1)  // configuration version
            w.writeUInt8(sps.count > 1 ? sps[1] : 0)  // profile
            w.writeUInt8(sps.count > 2 ? sps[2] : 0)  // profile compatibility
            w.writeUInt8(sps.count > 3 ? sps[3] : 0)  // level
            w.writeUInt8(0xFF)  // 6 reserved bits, NAL length size − 1 = 3
            w.writeUInt8(0xE1)  // 3 reserved bits, one SPS
            w.writeUInt16(UInt16(sps.count))
            w.writeBytes(sps)
            w.writeUInt8(1)  // one PPS
            w.writeUInt16(UInt16(pps.count))
            w.writeBytes(pps)
            if let ext = HighProfileExtension(sps: sps) {
                w.writeUInt8(0xFC | ext.chromaFormat)
                w.writeUInt8(0xF8 | ext.bitDepthLumaMinus8)
                w.writeUInt8(0xF8 | ext.bitDepthChromaMinus8)
                w.writeUInt8(0)  // no SPS extensions
            }
        }
    }

    mutating func writeCOLR(_ color: ColorDescription) {
        box("colr") { w in
            w.writeFourCC("nclc")
            w.writeUInt16(color.primaries)
            w.writeUInt16(color.transferFunction)
            w.writeUInt16(color.matrix)
        }
    }

    mutating func writePASP(_ aspect: PixelAspectRatio) {
        box("pasp") { w in
            w.writeUInt32(aspect.horizontalSpacing)
            w.writeUInt32(aspect.verticalSpacing)
        }
    }

    mutating func writeCLAP(_ aperture: CleanAperture) {
        box("clap") { w in
            for r in [aperture.width, aperture.height, aperture.horizontalOffset, aperture.verticalOffset] {
                w.writeInt32(Int32(clamping: r.numerator))
                w.writeUInt32(UInt32(clamping: r.denominator))
            }
        }
    }

    /// The version 0 sound description for 16-bit little-endian PCM.
    mutating func writeSOWT(_ audio: AudioTrackFormat) {
        box("sowt") { w in
            w.writeSampleEntryStart()
            w.writeUInt16(UInt16(audio.channels))
            w.writeUInt16(16)  // sample size, bits
            w.writeInt16(0)  // compression id
            w.writeUInt16(0)  // packet size
            w.writeUInt32(UInt32(audio.sampleRate) << 16)  // sample rate, 16.16
        }
    }

    /// The Opus sample entry of ISO base media files (Opus in ISOBMFF, §4.3): an audio sample
    /// entry at 48 kHz, 16 bits, then `dOps`, the decoder's setup — big-endian, unlike the
    /// OpusHead of Ogg, and without its magic.
    mutating func writeOpus(_ sound: LiveMovie.Sound) {
        box("Opus") { w in
            w.writeSampleEntryStart()
            w.writeUInt16(UInt16(sound.channels))
            w.writeUInt16(16)  // sample size, bits
            w.writeUInt16(0)  // pre-defined
            w.writeUInt16(0)  // reserved
            w.writeUInt32(LiveMovie.Sound.timescale << 16)  // sample rate, 16.16
            w.box("dOps") { w in
                w.writeUInt8(0)  // version
                w.writeUInt8(UInt8(sound.channels))  // output channel count
                w.writeUInt16(UInt16(clamping: sound.preSkip))
                w.writeUInt32(UInt32(sound.inputSampleRate))
                w.writeInt16(0)  // output gain
                w.writeUInt8(0)  // channel mapping family 0: mono or stereo, no mapping table
            }
        }
    }

    // MARK: Fragments

    mutating func writeMVEX(trackIDs: [UInt32]) {
        box("mvex") { w in
            for id in trackIDs { w.writeTREX(trackID: id) }
        }
    }

    mutating func writeTREX(trackID: UInt32) {
        fullBox("trex") { w in
            w.writeUInt32(trackID)
            w.writeUInt32(1)  // default sample description index
            w.writeUInt32(0)  // default sample duration
            w.writeUInt32(0)  // default sample size
            w.writeUInt32(0)  // default sample flags
        }
    }

    mutating func writeMFHD(sequenceNumber: UInt32) {
        fullBox("mfhd") { w in w.writeUInt32(sequenceNumber) }
    }

    /// The fragment's own check, the last child of its `moof`: a `free` box (which every
    /// reader skips, wherever it is) holding Vigil's tag and the CRC-32 of the fragment's
    /// media data, by which repair knows a payload that reached the disk whole.
    mutating func writePayloadCheck(crc: UInt32) {
        box("free") { w in
            w.writeUInt32(PayloadCheck.tag.bigEndianValue)
            w.writeUInt32(crc)
        }
    }

    /// A track fragment header whose data offsets count from the start of the `moof`.
    mutating func writeTFHD(trackID: UInt32) {
        fullBox("tfhd", flags: TrackRunFlags.defaultBaseIsMoof) { w in w.writeUInt32(trackID) }
    }

    mutating func writeTFDT(baseMediaDecodeTime: UInt64) {
        fullBox("tfdt", version: 1) { w in w.writeUInt64(baseMediaDecodeTime) }
    }

    /// A track run with a data offset and per-sample duration, size and (when `withFlags`) flags.
    /// Returns the position of the data offset field, to be patched once the `moof` size is known.
    mutating func writeTRUN(samples: [FragmentSample], withFlags: Bool) -> Int {
        var flags = TrackRunFlags.dataOffset | TrackRunFlags.sampleDuration | TrackRunFlags.sampleSize
        if withFlags { flags |= TrackRunFlags.sampleFlags }
        var dataOffsetPosition = 0
        fullBox("trun", flags: flags) { w in
            w.writeUInt32(UInt32(samples.count))
            dataOffsetPosition = w.count
            w.writeInt32(0)
            for s in samples {
                w.writeUInt32(s.duration)
                w.writeUInt32(s.size)
                if withFlags { w.writeUInt32(s.isSync ? SampleFlags.sync : SampleFlags.nonSync) }
            }
        }
        return dataOffsetPosition
    }
}

/// One sample as a track run lists it.
struct FragmentSample: Equatable {
    var duration: UInt32
    var size: UInt32
    var isSync: Bool
}

enum TrackRunFlags {
    static let dataOffset: UInt32 = 0x001
    static let firstSampleFlags: UInt32 = 0x004
    static let sampleDuration: UInt32 = 0x100
    static let sampleSize: UInt32 = 0x200
    static let sampleFlags: UInt32 = 0x400
    static let sampleCompositionOffset: UInt32 = 0x800
    static let defaultBaseIsMoof: UInt32 = 0x02_0000
}

enum SampleFlags {
    static let sync: UInt32 = 0x0200_0000
    static let nonSync: UInt32 = 0x0101_0000
    /// The `sample_is_non_sync_sample` bit.
    static let nonSyncBit: UInt32 = 0x0001_0000
}

/// The duration of a track in the movie time scale, including its start delay.
func movieDuration(of header: TrackHeader, _ table: SampleTable) -> UInt64 {
    guard header.timescale > 0 else { return header.startDelay }
    let media = table.mediaDuration
    return header.startDelay + (media * UInt64(TimeScale.movie) + UInt64(header.timescale) / 2)
        / UInt64(header.timescale)
}

/// The `free` box a fragment's `moof` ends with: tag, then the CRC-32 of its `mdat` payload.
enum PayloadCheck {
    static let tag: FourCC = "vgck"
    static let boxSize = 16
}
