import Foundation
import Media
import Testing

@testable import QuickTime

/// Golden bytes for the small boxes, written out by hand from the QuickTime File Format and
/// ISO/IEC 14496-12/-15 (see FORMATS.md), not recorded from the writer.
@Suite struct BoxTests {
    func bytes(_ build: (inout ByteWriter) -> Void) -> String {
        var w = ByteWriter()
        build(&w)
        return w.bytes.map { String(format: "%02x", $0) }.joined()
    }

    func hex(_ s: String) -> String { s.filter { !$0.isWhitespace } }

    @Test(arguments: [
        (Rotation.none, "00010000 00000000 00000000 00000000 00010000 00000000 00000000 00000000 40000000"),
        (.clockwise90, "00000000 00010000 00000000 ffff0000 00000000 00000000 00f00000 00000000 40000000"),
        (.clockwise180, "ffff0000 00000000 00000000 00000000 ffff0000 00000000 01400000 00f00000 40000000"),
        (.clockwise270, "00000000 ffff0000 00000000 00010000 00000000 00000000 00000000 01400000 40000000"),
    ])
    func matrixForEachRotation(rotation: Rotation, expected: String) {
        #expect(
            bytes { $0.writeMatrix(TrackHeader.matrix(for: rotation, width: 320 << 16, height: 240 << 16)) }
                == hex(expected))
    }

    @Test func trackHeaderCarriesTheMatrixAndCodedSize() {
        let header = TrackHeader(
            trackID: 1, kind: .video, timescale: 90000, width: 320 << 16, height: 240 << 16,
            matrix: TrackHeader.matrix(for: .clockwise90, width: 320 << 16, height: 240 << 16), sampleEntry: [])
        #expect(
            bytes { $0.writeTKHD(header, creationTime: 0xE000_0000, duration: 5000) }
                == hex(
                    """
                    0000005c 746b6864 00000003 e0000000 e0000000 00000001 00000000 00001388
                    00000000 00000000 0000 0000 0000 0000
                    00000000 00010000 00000000 ffff0000 00000000 00000000 00f00000 00000000 40000000
                    01400000 00f00000
                    """))
    }

    @Test func avcCForBaselineProfile() {
        let sps: [UInt8] = [0x67, 0x42, 0xC0, 0x1E, 0xD9, 0x00]
        let pps: [UInt8] = [0x68, 0xCE, 0x3C, 0x80]
        #expect(
            bytes { $0.writeAVCC(sps: sps, pps: pps) }
                == hex(
                    """
                    0000001d 61766343 01 42 c0 1e ff e1 0006 6742c01ed900 01 0004 68ce3c80
                    """))
    }

    @Test func avcCForHighProfileRepeatsChromaFormatAndBitDepth() {
        // x264 High profile 640×480 SPS: chroma_format_idc 1 (4:2:0), 8-bit luma and chroma.
        let sps: [UInt8] = [0x67, 0x64, 0x00, 0x1E, 0xAC, 0xD9, 0x40, 0xA0, 0x3D, 0xA1, 0x00, 0x00, 0x03, 0x00, 0x01]
        let pps: [UInt8] = [0x68, 0xEB, 0xE3, 0xCB]
        #expect(
            bytes { $0.writeAVCC(sps: sps, pps: pps) }
                == hex(
                    """
                    0000002a 61766343 01 64 00 1e ff e1 000f 6764001eacd940a03da10000030001 01 0004 68ebe3cb
                    fd f8 f8 00
                    """))
    }

    @Test func timeToSampleIsRunLength() {
        var table = SampleTable.emptyVideo()
        table.appendVideoChunk(offset: 0x1000, samples: [(100, 3000, true), (50, 3000, false), (60, 3000, false)])
        table.appendVideoChunk(offset: 0x2000, samples: [(90, 6000, true)])
        #expect(
            bytes { $0.writeSTTS(table.timeToSample) }
                == hex("00000020 73747473 00000000 00000002 00000003 00000bb8 00000001 00001770"))
        #expect(
            bytes { $0.writeSTSS(table.syncSamples ?? []) }
                == hex("00000018 73747373 00000000 00000002 00000001 00000004"))
        #expect(
            bytes { $0.writeSTSC(table.sampleToChunkRuns) }
                == hex(
                    """
                    00000028 73747363 00000000 00000002 00000001 00000003 00000001 00000002 00000001 00000001
                    """))
        #expect(
            bytes { $0.writeSTSZ(table.sizes) }
                == hex("00000024 7374737a 00000000 00000000 00000004 00000064 00000032 0000003c 0000005a"))
        #expect(
            bytes { $0.writeSTCO(table.chunks.map { UInt32($0.offset) }) }
                == hex("00000018 7374636f 00000000 00000002 00001000 00002000"))
        #expect(!table.needs64BitOffsets)
        #expect(table.mediaDuration == 15000)
    }

    @Test func syncSampleTableIsLeftOutWhenEverySampleIsSync() {
        var table = SampleTable.emptyVideo()
        table.appendVideoChunk(offset: 8, samples: [(10, 3000, true), (10, 3000, true)])
        #expect(table.allSamplesAreSync)
        let header = TrackHeader(
            trackID: 1, kind: .video, timescale: 90000, width: 1, height: 1, matrix: TrackHeader.identityMatrix,
            sampleEntry: [])
        #expect(!bytes { $0.writeSTBL(header, table) }.contains(hex("73747373")))
    }

    @Test func chunkOffsetsPast4GiBUseCO64() {
        var table = SampleTable.emptyAudio(bytesPerFrame: 4)
        table.appendAudio(offset: 0xFFFF_FFF0, frames: 48000, sampleRate: 48000)
        table.appendAudio(offset: 0x1_0000_0000, frames: 100, sampleRate: 48000)
        #expect(table.needs64BitOffsets)
        let header = TrackHeader(
            trackID: 2, kind: .audio, timescale: 48000, width: 0, height: 0, matrix: TrackHeader.identityMatrix,
            sampleEntry: [])
        let stbl = bytes { $0.writeSTBL(header, table) }
        #expect(stbl.contains(hex("00000020 636f3634 00000000 00000002 00000000fffffff0 0000000100000000")))
        #expect(!stbl.contains(hex("7374636f")))
        // PCM: one sample per frame, constant size, one tick each.
        #expect(bytes { $0.writeSTSZ(table.sizes) } == hex("00000014 7374737a 00000000 00000004 0000bbe4"))
        #expect(
            bytes { $0.writeSTTS(table.timeToSample) } == hex("00000018 73747473 00000000 00000001 0000bbe4 00000001"))
        #expect(
            bytes { $0.writeSTSC(table.sampleToChunkRuns) }
                == hex(
                    """
                    00000028 73747363 00000000 00000002 00000001 0000bb80 00000001 00000002 00000064 00000001
                    """))
    }

    @Test func pixelAspectCleanApertureColour() {
        #expect(
            bytes { $0.writePASP(PixelAspectRatio(horizontalSpacing: 4, verticalSpacing: 3)) }
                == hex("00000010 70617370 00000004 00000003"))
        #expect(
            bytes {
                $0.writeCLAP(
                    CleanAperture(width: Rational(704, 1), height: Rational(480, 1), horizontalOffset: Rational(-1, 2)))
            }
                == hex(
                    """
                    00000028 636c6170 000002c0 00000001 000001e0 00000001 ffffffff 00000002 00000000 00000001
                    """))
        #expect(bytes { $0.writeCOLR(.bt709) } == hex("00000012 636f6c72 6e636c63 0001 0001 0001"))
        #expect(bytes { $0.writeCOLR(.bt601) } == hex("00000012 636f6c72 6e636c63 0006 0001 0006"))
    }

    @Test func soundDescriptionForPCM() {
        #expect(
            bytes { $0.writeSOWT(AudioTrackFormat(sampleRate: 48000, channels: 1)) }
                == hex(
                    """
                    00000024 736f7774 000000000000 0001 0000 0000 00000000 0001 0010 0000 0000 bb800000
                    """))
        #expect(
            bytes { $0.writeSOWT(AudioTrackFormat(sampleRate: 44100, channels: 2)) }
                == hex(
                    """
                    00000024 736f7774 000000000000 0001 0000 0000 00000000 0002 0010 0000 0000 ac440000
                    """))
    }

    @Test func editListDelaysATrack() {
        #expect(
            bytes { $0.writeEDTS(emptyDuration: 250, mediaDuration: 3720) }
                == hex(
                    """
                    00000030 65647473 00000028 656c7374 00000000 00000002
                    000000fa ffffffff 00010000
                    00000e88 00000000 00010000
                    """))
    }

    @Test func fileTypeAndFragmentBoxes() {
        #expect(bytes { $0.writeFTYP() } == hex("00000014 66747970 71742020 00000200 71742020"))
        #expect(
            bytes { $0.writeTREX(trackID: 1) }
                == hex("00000020 74726578 00000000 00000001 00000001 00000000 00000000 00000000"))
        #expect(bytes { $0.writeMFHD(sequenceNumber: 7) } == hex("00000010 6d666864 00000000 00000007"))
        #expect(bytes { $0.writeTFHD(trackID: 1) } == hex("00000010 74666864 00020000 00000001"))
        #expect(
            bytes { $0.writeTFDT(baseMediaDecodeTime: 90000) } == hex("00000014 74666474 01000000 00000000 00015f90"))
        var position = 0
        let trun = bytes {
            position = $0.writeTRUN(
                samples: [
                    FragmentSample(duration: 3000, size: 100, isSync: true),
                    FragmentSample(duration: 3000, size: 50, isSync: false),
                ], withFlags: true)
        }
        #expect(
            trun
                == hex(
                    """
                    0000002c 7472756e 00000701 00000002 00000000
                    00000bb8 00000064 02000000
                    00000bb8 00000032 01010000
                    """))
        #expect(position == 16)
        #expect(bytes { $0.writeMDATHeader(payloadSize: 100) } == hex("0000006c 6d646174"))
        #expect(bytes { $0.writeMDATHeader(payloadSize: 0x1_0000_0000) } == hex("00000001 6d646174 0000000100000010"))
    }

    /// A fragment as the clips and the live view make it: the video's run with each sample's
    /// flags, the sound's without, each data offset pointing at its samples in the `mdat`
    /// after the `moof` (208 bytes in: the video's 150 bytes, then the sound's 20), and the
    /// clip's payload check last; a run without samples writes no `traf`.
    @Test func aFragmentPointsEachRunAtItsSamples() {
        let video = MovieFragment.Run(
            trackID: 1, decodeTime: 90000,
            samples: [
                FragmentSample(duration: 3000, size: 100, isSync: true),
                FragmentSample(duration: 3000, size: 50, isSync: false),
            ], flagsEachSample: true)
        let sound = MovieFragment.Run(
            trackID: 2, decodeTime: 1024, samples: [FragmentSample(duration: 1024, size: 20, isSync: true)],
            flagsEachSample: false)
        let (header, moofSize) = MovieFragment(
            sequenceNumber: 3, runs: [video, sound], payloadCheck: 0xDEAD_BEEF
        ).header()
        func text<B: Sequence<UInt8>>(_ b: B) -> String { b.map { String(format: "%02x", $0) }.joined() }
        let (moof, mdat) = (header[..<moofSize], header[moofSize...])
        #expect(
            text(moof)
                == hex(
                    """
                    000000c8 6d6f6f66
                    00000010 6d666864 00000000 00000003
                    00000058 74726166
                    00000010 74666864 00020000 00000001
                    00000014 74666474 01000000 00000000 00015f90
                    0000002c 7472756e 00000701 00000002 000000d0
                    00000bb8 00000064 02000000 00000bb8 00000032 01010000
                    00000048 74726166
                    00000010 74666864 00020000 00000002
                    00000014 74666474 01000000 00000000 00000400
                    0000001c 7472756e 00000301 00000001 00000166 00000400 00000014
                    00000010 66726565 7667636b deadbeef
                    """))
        #expect(text(mdat) == hex("000000b2 6d646174"))
        var silent = video
        silent.samples = []
        let alone = MovieFragment(sequenceNumber: 4, runs: [silent, sound]).header()
        #expect(alone.moofSize == 8 + 16 + 72 && Array(alone.bytes[96...]) == [0, 0, 0, 28] + Array("mdat".utf8))
        #expect(text(alone.bytes[24..<32]) == hex("00000048 74726166"))
    }

    @Test func handlerNamesArePascalStrings() {
        #expect(
            bytes { $0.writeHDLR(componentType: "mhlr", subtype: "vide", name: "VideoHandler") }
                == hex(
                    """
                    0000002d 68646c72 00000000 6d686c72 76696465 00000000 00000000 00000000 0c 566964656f48616e646c6572
                    """))
    }

    @Test func exponentialGolombReader() {
        // 1 → 0, 010 → 1, 011 → 2, 00100 → 3, 00111 → 6
        var r = ExpGolombReader(rbsp: [0b1010_0110, 0b0100_0011, 0b1000_0000])
        #expect(r.readUE() == 0)
        #expect(r.readUE() == 1)
        #expect(r.readUE() == 2)
        #expect(r.readUE() == 3)
        #expect(r.readUE() == 6)
        #expect(r.readUE() == nil)
        #expect(removeEmulationPrevention([0, 0, 3, 1, 0, 0, 3, 0, 3]) == [0, 0, 1, 0, 0, 0, 3])
    }
}
