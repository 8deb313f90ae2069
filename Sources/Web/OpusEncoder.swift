internal import COpus
import Media

/// Sound for the live stream, encoded as Opus with libopus: 20 ms frames of 16-bit PCM in,
/// one packet out for each. Opus takes 8, 12, 16, 24 or 48 kHz, mono or stereo; a decoder
/// always plays it at 48 kHz, where a frame is 960 samples long.
///
/// Not thread-safe: one encoder is used by one caller at a time (`LiveSound` holds it under
/// its lock).
final class OpusEncoder {
    /// The input sample rates Opus takes.
    static let sampleRates: Set<Int> = [8000, 12000, 16000, 24000, 48000]
    /// A frame lasts 20 ms: 960 samples at 48 kHz.
    static let frameTicks = 960
    /// 64 kbit/s a channel: clear speech and room sound, a small part of the video's bytes.
    static let bitsPerSecondPerChannel = 64_000
    /// libopus's effort, 0 to 10 (its default): 5 costs about half as much, and at this bit
    /// rate sounds the same (`make bench` measures the encode).
    static let complexity = 5

    let sampleRate: Int
    let channels: Int
    /// Sample frames (per channel) in one 20 ms frame at `sampleRate`.
    let frameSamples: Int
    /// What a decoder drops at the start of the stream: the encoder's lookahead, in samples at
    /// 48 kHz (the `PreSkip` of the stream's `dOps`).
    let preSkip: Int
    private let encoder: OpaquePointer
    private var packet = [UInt8](repeating: 0, count: 4000)

    enum Failure: Error, CustomStringConvertible {
        case unsupported(sampleRate: Int, channels: Int)
        case library(call: String, code: Int32)

        var description: String {
            switch self {
            case .unsupported(let rate, let channels):
                "Opus takes 8000, 12000, 16000, 24000 or 48000 Hz in one or two channels, not \(rate) Hz in \(channels)"
            case .library(let call, let code):
                "\(call) failed: \(String(cString: opus_strerror(code)))"
            }
        }
    }

    init(sampleRate: Int, channels: Int) throws(Failure) {
        guard Self.sampleRates.contains(sampleRate), (1...2).contains(channels) else {
            throw .unsupported(sampleRate: sampleRate, channels: channels)
        }
        var error: Int32 = OPUS_OK
        guard let made = opus_encoder_create(Int32(sampleRate), Int32(channels), OPUS_APPLICATION_AUDIO, &error),
            error == OPUS_OK
        else { throw .library(call: "opus_encoder_create", code: error) }
        encoder = made
        var lookahead: Int32 = 0
        var code = vigil_opus_lookahead(made, &lookahead)
        if code == OPUS_OK {
            code = vigil_opus_set_bitrate(made, Int32(Self.bitsPerSecondPerChannel * channels))
        }
        if code == OPUS_OK { code = vigil_opus_set_complexity(made, Int32(Self.complexity)) }
        guard code == OPUS_OK else {
            opus_encoder_destroy(made)
            throw .library(call: "opus_encoder_ctl", code: code)
        }
        self.sampleRate = sampleRate
        self.channels = channels
        frameSamples = sampleRate / 50
        // The lookahead is counted at the input rate; PreSkip always at 48 kHz.
        preSkip = Int(lookahead) * (48000 / sampleRate)
    }

    deinit { opus_encoder_destroy(encoder) }

    /// One packet for one frame: `samples` holds `frameSamples × channels` interleaved samples.
    func encode(_ samples: ArraySlice<Int16>) throws(Failure) -> [UInt8] {
        precondition(samples.count == frameSamples * channels, "an Opus frame is 20 ms of samples")
        let capacity = Int32(packet.count)
        let written = samples.withUnsafeBufferPointer { pcm in
            packet.withUnsafeMutableBufferPointer { out in
                opus_encode(encoder, pcm.baseAddress!, Int32(frameSamples), out.baseAddress!, capacity)
            }
        }
        guard written > 0 else { throw .library(call: "opus_encode", code: written) }
        return Array(packet[..<Int(written)])
    }
}
