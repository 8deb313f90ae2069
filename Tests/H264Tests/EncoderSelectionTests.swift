import Media
import Testing

@testable import H264

/// What `encoder.backend` and `encoder.device` make of the devices found.
@Suite struct EncoderSelectionTests {
    static func device(
        _ path: String, _ card: String, writes coded: [FourCC], maximum: (Int, Int)? = (1920, 1920)
    ) -> M2MListing {
        M2MListing(
            path: path, driver: card, card: card, multiplanar: true, rawFormats: ["YU12", "NV12"],
            codedFormats: coded, sizes: maximum.map { ((32, 32), $0) },
            controls: [("FORCE_KEY_FRAME", true)])
    }
    static let pi = device("/dev/video11", "bcm2835-codec-encode", writes: ["H264"])
    static let vicodec = device("/dev/video2", "vicodec", writes: ["FWHT"], maximum: nil)

    func choose(
        _ backend: EncoderBackend, _ device: String? = nil, in devices: [M2MListing], _ size: (Int, Int) = (1280, 720)
    )
        -> EncoderSelection
    {
        EncoderSelection.choose(backend: backend, device: device, devices: devices, width: size.0, height: size.1)
    }

    /// The selection as the one value the agent records with: the hardware factory first and
    /// x264 behind it, or x264 alone; what the agent says about it; nothing for an error.
    @Test func theChoiceIsOneValueWithX264Behind() throws {
        let x264 = EncoderSettings(
            preset: .ultrafast, tune: [.zerolatency], profile: .high, crf: 23, rateCap: .uncapped, threads: 1)
        let hardware = HardwareEncoderSettings(bitrateKbps: 4000, profile: .high, keyframeInterval: 1)
        let required = try #require(choose(.v4l2, in: [Self.pi]).choice(x264: x264, hardware: hardware))
        let preferred = try #require(required.preferred as? V4L2EncoderFactory)
        #expect(preferred.device == "/dev/video11" && preferred.settings == hardware && required.required)
        #expect((required.fallback as? X264EncoderFactory)?.settings == x264)
        #expect(required.announcement?.backend == "v4l2" && required.announcement?.warn == false)
        #expect(required.announcement?.reason.hasSuffix(": /dev/video11 (bcm2835-codec-encode)") == true)

        let auto = try #require(choose(.auto, in: [Self.pi]).choice(x264: x264, hardware: hardware))
        #expect(auto.preferred != nil && !auto.required)

        let tooLarge = try #require(
            choose(.auto, in: [Self.pi], (3840, 2160)).choice(x264: x264, hardware: hardware))
        #expect(tooLarge.preferred == nil && (tooLarge.fallback as? X264EncoderFactory)?.settings == x264)
        #expect(tooLarge.announcement?.backend == "x264" && tooLarge.announcement?.warn == true)

        #expect(choose(.v4l2, in: [Self.vicodec]).choice(x264: x264, hardware: hardware) == nil)
    }

    @Test func autoTakesTheFirstH264EncoderAndOtherwiseX264() {
        guard case .hardware("/dev/video11", _, false, _) = choose(.auto, in: [Self.vicodec, Self.pi]) else {
            Issue.record("the Pi's encoder was not chosen")
            return
        }
        #expect(
            choose(.auto, in: [Self.vicodec])
                == .x264(reason: "no hardware H.264 encoder: /dev/video2 (vicodec) writes FWHT", warn: false))
        #expect(
            choose(.auto, in: [])
                == .x264(reason: "no hardware H.264 encoder: no memory-to-memory device was found", warn: false))
        #expect(choose(.x264, in: [Self.pi]) == .x264(reason: "encoder.backend = \"x264\"", warn: false))
    }

    /// Over the device's size limit: `auto` warns and records with x264, `v4l2` is a
    /// configuration error that names the limit.
    @Test func aSizeOverTheLimitFallsBackOrIsAnError() {
        guard case .x264(let reason, true) = choose(.auto, in: [Self.pi], (2592, 1944)) else {
            Issue.record("no warning fallback")
            return
        }
        #expect(reason.contains("encodes at most 1920×1920"), "\(reason)")
        guard case .configurationError(let problem) = choose(.v4l2, in: [Self.pi], (2592, 1944)) else {
            Issue.record("no error")
            return
        }
        #expect(
            problem.contains(
                "/dev/video11 (bcm2835-codec-encode) encodes at most 1920×1920, and camera.width × camera.height is 2592×1944"
            ))
    }

    /// `v4l2` with a device that is not an H.264 encoder, or no device: an error that names
    /// what was found and the fix.
    @Test func v4l2WithoutAnH264EncoderIsAConfigurationError() {
        guard case .configurationError(let problem) = choose(.v4l2, "/dev/video2", in: [Self.vicodec]) else {
            Issue.record("vicodec was taken for an H.264 encoder")
            return
        }
        #expect(problem.hasPrefix("no hardware H.264 encoder: /dev/video2 (vicodec) writes FWHT; set encoder.device"))
        guard case .configurationError(let missing) = choose(.v4l2, "/dev/video0", in: [Self.pi]) else {
            Issue.record("a device that is not there was taken")
            return
        }
        #expect(missing.hasPrefix("encoder.device = \"/dev/video0\" is not a memory-to-memory device"))
        guard case .hardware("/dev/video11", _, true, _) = choose(.v4l2, "/dev/video11", in: [Self.vicodec, Self.pi])
        else {
            Issue.record("the named device was not chosen")
            return
        }
    }
}
