import Capture
import Foundation
import Media
import QuickTime
import Storage
import TestSupport
import Testing
import V4L2

@testable import H264

/// A stand-in for a stateful hardware encoder, for the parts of `V4L2Encoder` no device here
/// can drive: x264 writing an Annex B byte stream as V4L2 encoders do (an access unit delimiter,
/// SPS and PPS before each IDR with `REPEAT_SEQ_HEADER`), honouring `FORCE_KEY_FRAME` on the
/// next frame queued, returning coded buffers `delay` frames late as a device's queue does,
/// and starting a new stream after a drain.
final class ByteStreamSession: EncodingSession {
    let path = "/dev/video-test"
    let identity = (driver: "x264-annexb", card: "test encoder")
    var controls: [UInt32: Int32] = [:]
    /// Controls it does not have (`setControl` returns false).
    var missing: Set<UInt32> = []
    let format: VideoFormat
    let delay: Int
    /// Sends the parameter sets in a buffer of their own before the IDR's.
    var headersApart = false
    /// Stops answering after this many frames (the poll times out).
    var hangAfter: Int?
    /// Takes frames but returns nothing after this many.
    var silentAfter: Int?
    /// From this many frames on, every IDR carries a different SPS (as a device reset would).
    var changeParameterSetsAfter: Int?
    private var x264: X264Encoder
    private var forceNext = false
    private var held: [M2MCodedBuffer] = []
    private var frames = 0
    private(set) var drains = 0
    private(set) var restarts = 0

    init(format: VideoFormat, delay: Int = 2) throws {
        self.format = format
        self.delay = delay
        x264 = try X264Encoder(format: format, settings: deterministic, byteStream: true, repeatHeaders: true)
    }

    func setControl(_ id: UInt32, _ value: Int32, _ name: String) throws(V4L2Error) -> Bool {
        guard !missing.contains(id) else { return false }
        controls[id] = value
        if id == M2MSession.Control.forceKeyFrame { forceNext = true }
        return true
    }

    func encode(_ frame: VideoFrame) throws(V4L2Error) -> [M2MCodedBuffer] {
        frames += 1
        if let hangAfter, frames > hangAfter {
            throw V4L2Error(
                device: path, call: .poll, code: ETIMEDOUT, role: .encoder,
                problem: "the encoder returned nothing for 2000 ms; it is hung")
        }
        let samples: [EncodedSample]
        do { samples = try x264.encode(frame, keyframe: forceNext) } catch {
            throw V4L2Error(device: path, call: .queueBuffer, code: EIO, role: .encoder, problem: error.description)
        }
        forceNext = false
        if let silentAfter, frames > silentAfter { return [] }
        held += samples.flatMap(buffers)
        let ready = max(0, held.count - delay)
        defer { held.removeFirst(ready) }
        return Array(held.prefix(ready))
    }

    func drain() throws(V4L2Error) -> [M2MCodedBuffer] {
        drains += 1
        var samples: [EncodedSample] = []
        do { samples = try x264.flush() } catch {
            throw V4L2Error(device: path, call: .encoderCommand, code: EIO, role: .encoder, problem: error.description)
        }
        defer { held = [] }
        return held + samples.flatMap(buffers)
    }

    func restart() throws(V4L2Error) {
        restarts += 1
        do {
            x264 = try X264Encoder(format: format, settings: deterministic, byteStream: true, repeatHeaders: true)
        } catch {
            throw V4L2Error(device: path, call: .streamOn, code: EIO, role: .encoder, problem: error.description)
        }
    }

    /// The coded buffers a device would return for one of x264's access units.
    private func buffers(_ sample: EncodedSample) -> [M2MCodedBuffer] {
        var bytes = sample.data
        if let after = changeParameterSetsAfter, frames > after, sample.isKeyframe,
            let sps = Self.range(ofType: 7, in: bytes)
        {
            bytes[sps.upperBound - 1] ^= 0x01  // the last byte of the SPS (its stop bit's byte)
        }
        guard headersApart, sample.isKeyframe, let pps = Self.range(ofType: 8, in: bytes) else {
            return [M2MCodedBuffer(bytes: bytes, timestamp: sample.pts, isKeyframe: sample.isKeyframe)]
        }
        return [
            M2MCodedBuffer(bytes: Array(bytes[..<pps.upperBound]), timestamp: sample.pts, isKeyframe: false),
            M2MCodedBuffer(bytes: Array(bytes[pps.upperBound...]), timestamp: sample.pts, isKeyframe: true),
        ]
    }

    /// Where the first NAL unit of `type` lies in an Annex B stream (without its start code).
    static func range(ofType type: UInt8, in bytes: [UInt8]) -> Range<Int>? {
        guard let units = try? AnnexB.units(bytes[...]) else { return nil }
        return units.first { $0.first.map { $0 & 0x1F } == type }.map { $0.startIndex..<$0.endIndex }
    }
}

@Suite struct V4L2EncoderTests {
    static let settings = HardwareEncoderSettings(bitrateKbps: 2000, profile: .high, keyframeInterval: 1)

    func frames(seconds: Double = 3) throws -> [VideoFrame] {
        let moving = SceneObject(
            enter: .init(seconds: 0.5), leave: .init(seconds: 2.5), path: .rightToLeft(y: 0.5))
        return try allFrames(try scene(seconds: seconds, schedule: SceneSchedule(objects: [moving])))
    }

    /// The samples are x264's own for the same frames, byte for byte: the conversion from the
    /// device's Annex B stream (delimiters and repeated parameter sets taken out, late buffers
    /// matched to their frames) loses and adds nothing. Keyframes fall where the schedule puts them.
    @Test(arguments: [false, true]) func samplesAreTheSameAsX264sOwn(headersApart: Bool) throws {
        let frames = try frames()
        let session = try ByteStreamSession(format: frames[0].format)
        session.headersApart = headersApart
        let encoder = try V4L2Encoder(session: session, format: frames[0].format, settings: Self.settings)
        let reference = try X264Encoder(format: frames[0].format, settings: deterministic)
        #expect(encoder.sequenceParameterSet == reference.sequenceParameterSet)
        #expect(encoder.pictureParameterSet == reference.pictureParameterSet)

        let keys = Set(scheduledKeyframes(frames.map(\.timestamp)))
        var samples: [EncodedSample] = []
        for (i, frame) in frames.enumerated() {
            samples += try encoder.encode(frame, keyframe: keys.contains(i))
        }
        samples += try encoder.flush()
        let expected = try encodeAll(frames, encoder: reference)
        try #require(samples.count == frames.count)
        // x264 sends its own SEI (its version and options) with its headers when it writes
        // length-prefixed samples, and in the first IDR when it writes a byte stream: the one
        // difference the conversion keeps, as it keeps any SEI a device writes.
        let first = try #require(samples.first?.data)
        let sei = first.count - (expected.first?.data.count ?? 0)
        #expect(
            sei > 5 && first[4] & 0x1F == 6
                && Int(first[0]) << 24 | Int(first[1]) << 16 | Int(first[2]) << 8 | Int(first[3]) == sei - 4)
        #expect(Array(first[sei...]) == expected.first?.data)
        let produced = samples
        samples[0].data = Array(first[sei...])
        let differ = zip(samples, expected).enumerated().first { $1.0 != $1.1 }.map { n, pair in
            "sample \(n): \(pair.0.data.count) bytes at \(pair.0.pts) (key \(pair.0.isKeyframe)), x264 \(pair.1.data.count) bytes at \(pair.1.pts) (key \(pair.1.isKeyframe))"
        }
        #expect(
            differ == nil && samples.count == expected.count, "\(differ ?? "") of \(samples.count), \(expected.count)")
        #expect(samples.indices.filter { samples[$0].isKeyframe } == keys.sorted())
        #expect(samples.map(\.pts) == frames.map(\.timestamp))
        #expect(throws: EncoderError.closed) { try encoder.encode(frames[0], keyframe: false) }
        #expect(session.drains == 2 && session.restarts == 1)  // the grey frame's, and the end

        let dir = try TemporaryDirectory()
        let path = dir.file("v4l2.mov")
        let track = VideoTrackFormat(
            width: 160, height: 120, sequenceParameterSet: encoder.sequenceParameterSet,
            pictureParameterSet: encoder.pictureParameterSet)
        let writer = try MovieWriter(path: path, description: MovieDescription(creationTime: Date(), video: track))
        for gop in groupedIntoGOPs(produced, end: nil) { try writer.append(gop) }
        try writer.close()
        let probe = try expectPlayable(path)
        #expect(probe?.video?["nb_frames"] == "\(frames.count)")
    }

    /// The controls a device gets: VBR at the bit rate, the profile, a level that holds the
    /// size and rate, the I-frame period of one keyframe interval, repeated headers.
    @Test func controlsAreSetFromTheSettingsAndTheFormat() throws {
        let format = try VideoFormat(width: 160, height: 120, pixelFormat: .nv12, frameRate: Rational(25, 1))
        let session = try ByteStreamSession(format: format)
        let encoder = try V4L2Encoder(
            session: session, format: format,
            settings: HardwareEncoderSettings(bitrateKbps: 3500, profile: .main, keyframeInterval: 2))
        typealias C = M2MSession.Control
        #expect(session.controls[C.bitrateMode] == 0)
        #expect(session.controls[C.bitrate] == 3_500_000)
        #expect(session.controls[C.h264Profile] == 2)
        #expect(session.controls[C.h264Level] == 8)  // 3.0
        #expect(session.controls[C.h264IPeriod] == 50)
        #expect(session.controls[C.gopSize] == 50)
        #expect(session.controls[C.repeatSequenceHeader] == 1)
        #expect(encoder.logDescription.map(\.name) == ["encoder", "device", "card", "bitrate_kbps", "level"])
    }

    @Test func levelsHoldTheSizeAndRate() {
        func level(_ w: Int, _ h: Int, _ fps: Double) -> String {
            H264Level.fitting(width: w, height: h, frameRate: fps).name
        }
        #expect(level(640, 480, 30) == "3.0")
        #expect(level(1280, 720, 30) == "3.1")
        #expect(level(1280, 720, 60) == "3.2")
        #expect(level(1920, 1080, 30) == "4.0")
        #expect(level(1920, 1080, 60) == "4.2")
        #expect(level(1920, 1920, 30) == "5.0")  // over what the Pi's encoder takes
    }

    /// A device that cannot be told where keyframes go cannot record clips that start at an
    /// event: refused when opened, by name. The other controls are optional.
    @Test func aDeviceWithoutForcedKeyframesIsRefused() throws {
        let format = try VideoFormat(width: 160, height: 120, pixelFormat: .nv12, frameRate: Rational(30, 1))
        let session = try ByteStreamSession(format: format)
        session.missing = [M2MSession.Control.forceKeyFrame]
        #expect {
            _ = try V4L2Encoder(session: session, format: format, settings: Self.settings)
        } throws: { error in
            "\(error)".contains("/dev/video-test (test encoder) has no FORCE_KEY_FRAME control")
        }
        let lenient = try ByteStreamSession(format: format)
        lenient.missing = [M2MSession.Control.h264Level, M2MSession.Control.repeatSequenceHeader]
        _ = try V4L2Encoder(session: lenient, format: format, settings: Self.settings)
    }

    /// A hung device and a changed stream fail the encoder as `.deviceFailed`, which the
    /// pipeline answers with a new encoder (and a new clip part).
    @Test func aHungDeviceOrAChangedStreamFailsTheEncoder() throws {
        let frames = try frames(seconds: 2.5)
        let hung = try ByteStreamSession(format: frames[0].format)
        hung.hangAfter = 10
        let encoder = try V4L2Encoder(session: hung, format: frames[0].format, settings: Self.settings)
        var failure: EncoderError?
        for frame in frames {
            do { _ = try encoder.encode(frame, keyframe: frame.sequence == 0) } catch {
                failure = error
                break
            }
        }
        guard case .deviceFailed(let backend, let details)? = failure else {
            Issue.record("no device failure: \(String(describing: failure))")
            return
        }
        #expect(backend == "v4l2")
        #expect(details.contains("frame 10") && details.contains("it is hung"), "\(details)")

        // One that takes frames and returns nothing: hung after 2 s of frames without output.
        let silent = try ByteStreamSession(format: frames[0].format)
        silent.silentAfter = 12
        let quiet = try V4L2Encoder(session: silent, format: frames[0].format, settings: Self.settings)
        var silence: EncoderError?
        var outputs = 0
        for frame in frames {
            do { outputs += try quiet.encode(frame, keyframe: frame.sequence == 0).count } catch {
                silence = error
                break
            }
        }
        #expect(outputs == 9)  // eleven frames after the grey one, two of them still in the device
        guard case .deviceFailed(_, let said)? = silence else {
            Issue.record("no device failure: \(String(describing: silence))")
            return
        }
        #expect(said.contains("returned nothing for 2.03") && said.contains("it is hung"), "\(said)")

        let changing = try ByteStreamSession(format: frames[0].format)
        changing.changeParameterSetsAfter = 20
        let second = try V4L2Encoder(session: changing, format: frames[0].format, settings: Self.settings)
        let keys = Set(scheduledKeyframes(frames.map(\.timestamp)))
        #expect {
            for (i, frame) in frames.enumerated() { _ = try second.encode(frame, keyframe: keys.contains(i)) }
            _ = try second.flush()
        } throws: { error in
            "\(error)".contains("changed its sequence parameter set mid-stream")
        }
    }
}
