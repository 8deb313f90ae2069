import Foundation
import Media
import TestSupport
import Testing

@testable import QuickTime

/// The bytes of a clip and of the live view's segments, held by their MD5: the fragments both
/// are made of come from one builder (`MovieFragment`), and neither may change by a byte
/// without meaning to. A clip's bytes are also what the power-cut suite's recorded block
/// writes hold (scripts/powercut/fixtures): when the clip's digests here change on purpose,
/// those fixtures are stale too — re-record them (`make powercut-record`).
///
/// The samples are made up (length-prefixed NAL units of known bytes), so the digests do not
/// depend on an encoder's version.
@Suite struct FragmentBytesTests {
    static let video = VideoTrackFormat(
        width: 320, height: 240, sequenceParameterSet: [0x67, 0x42, 0xC0, 0x1E, 0xD9, 0x00],
        pictureParameterSet: [0x68, 0xCE, 0x3C, 0x80], rotation: .clockwise90, color: .bt601)

    /// A sample of `size` bytes: one NAL unit (an IDR slice for a keyframe, else a P slice)
    /// whose bytes follow from `seed`.
    static func sample(_ seed: Int, size: Int, at time: Timestamp, keyframe: Bool) -> EncodedSample {
        var data: [UInt8] = [0, 0, UInt8((size - 4) >> 8), UInt8((size - 4) & 0xFF), keyframe ? 0x65 : 0x41]
        for i in data.count..<size { data.append(UInt8(truncatingIfNeeded: seed &* 31 &+ i &* 7)) }
        return EncodedSample(data: data, pts: time, dts: time, isKeyframe: keyframe)
    }

    /// `count` GOPs of `length` frames at 25 fps from `start`, each frame's size its own.
    static func gops(_ count: Int, length: Int, from start: Timestamp, seed: Int = 0) -> [GOP] {
        let samples = (0..<count * length).map { (i: Int) -> EncodedSample in
            let size: Int = 40 + (i * 37) % 300
            let time: Timestamp = start + Timestamp.Duration(nanoseconds: Int64(i) * 40_000_000)
            return sample(seed + i, size: size, at: time, keyframe: i % length == 0)
        }
        return GOP.grouped(samples)
    }

    static func pcm(_ frames: Int, seed: Int) -> [UInt8] {
        (0..<frames * 2).map { UInt8(truncatingIfNeeded: seed &+ $0 &* 13) }
    }

    static func md5(_ bytes: [UInt8]) -> String { MD5.digest(bytes).lowercaseHex }

    @Test func aClipIsTheSameByteForByte() throws {
        let storage = MemoryStorage()
        let file = try storage.createMovie("pin.mov")
        let writer = try MovieWriter(
            output: file, path: "pin.mov",
            description: MovieDescription(
                creationTime: Date(timeIntervalSince1970: 1_790_000_000), video: Self.video,
                audio: AudioTrackFormat(sampleRate: 16000, channels: 1)))
        let start = Timestamp(nanoseconds: 3_000_000_000)
        var gops = Self.gops(5, length: 12, from: start)
        gops.remove(at: 2)  // dropped while the disk fell behind: the frame before stays on screen
        var digests: [String] = []
        // Sound from before the first frame (cut), then each GOP's from its start: longer than
        // the GOP (the rest waits for the next fragment; overlaps are dropped) or shorter (the
        // gap is filled with silence).
        try writer.appendAudio(Self.pcm(4000, seed: 1), time: start - Timestamp.Duration(nanoseconds: 100_000_000))
        for (gop, frames) in zip(gops, [7000, 9000, 6000, 5000]) {
            try writer.appendAudio(Self.pcm(frames, seed: frames), time: gop.start)
            try writer.append(gop)
            digests.append(Self.md5(storage.contents("pin.mov") ?? []))  // appended hidden
            try writer.synchronize()
            digests.append(Self.md5(storage.contents("pin.mov") ?? []))  // revealed
        }
        // Sound after the last GOP was written, within its frames: a fragment of sound alone.
        try writer.appendAudio(Self.pcm(1600, seed: 3), time: gops[3].start + .init(nanoseconds: 312_500_000))
        let summary = try writer.close()
        digests.append(Self.md5(storage.contents("pin.mov") ?? []))
        #expect(summary.fragments == 5 && summary.videoFrames == 48)
        #expect(
            digests == [
                "4d5166a9e06e4421fc2e0b76d713f9d7", "30e62dda3f0abd24924da6c74f80a60e",
                "6b3f6a77bd7c518805f3db91fb1f7978", "9d7fdbb9aac03cfaf5b6e06d29fd7c5c",
                "7737c9576cf52c9e0f786f7a8848c6c6", "ff96a411985750a79772b2a3b2bf5e88",
                "cd9893885db8a99860a4b3be54d9e21c", "2e7832355456c027f0224de491d6a4fa",
                "148919812ce5b0a8315edbfe5c195f8a",
            ])
    }

    @Test func liveSegmentsAreTheSameByteForByte() throws {
        let movie = try LiveMovie(
            video: Self.video, sound: LiveMovie.Sound(channels: 1, inputSampleRate: 16000, preSkip: 312))
        let origin = Timestamp(nanoseconds: 9_000_000_000)
        let gops = Self.gops(3, length: 10, from: origin, seed: 5)
        let packets = (0..<25).map { i in (0..<(20 + i % 7)).map { UInt8(truncatingIfNeeded: i &* 11 &+ $0) } }
        var digests = [Self.md5(movie.initialization())]
        // Without sound; with sound starting before the timeline; with sound partly sent before.
        digests.append(Self.md5(LiveMovie.segment(gops[0], sequence: 1, origin: origin).bytes))
        let early = LiveMovie.SoundRun(start: origin - Timestamp.Duration(nanoseconds: 30_000_000), packets: packets)
        let second = LiveMovie.segment(gops[1], sound: early, sequence: 2, origin: origin)
        digests.append(Self.md5(second.bytes))
        let late = LiveMovie.SoundRun(start: gops[2].start, packets: packets)
        digests.append(
            Self.md5(
                LiveMovie.segment(
                    gops[2], sound: late, soundFrom: (second.soundEnd ?? 0) + 48_000, sequence: 3,
                    origin: origin
                ).bytes))
        #expect(
            digests == [
                "742e6f2506a24776b5e3fe0877cd4833", "58754b521ba3b9c2294987f04ede14ff",
                "ca9e95291d2cae94e2e6ac237bb9600e", "39416a8ff0bde8f8016c86fa6540d462",
            ])
    }
}
