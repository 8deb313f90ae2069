import Media
internal import POSIX

/// Where sound comes from: an ALSA microphone, or a synthetic tone for demos and tests.
///
/// The agent calls `read()` in a loop on a dedicated audio thread; it blocks until the next
/// period is captured. Chunks carry the capture time of their first sample frame on the
/// monotonic clock video frames use, so the two line up in every clip.
public protocol AudioSource: AnyObject {
    var sampleRate: Int { get }
    var channels: Int { get }
    /// Names the source in logs and errors (`hw:1,0`, `synthetic`).
    var name: String { get }
    /// The next captured chunk (interleaved S16LE), or nil when the source has ended.
    func read() throws(CaptureError) -> AudioChunk?
    /// Overruns recovered so far (sound lost while the reader fell behind).
    var overruns: Int { get }
}

extension AudioSource {
    public var overruns: Int { 0 }
}

/// A sine tone in real time, timestamped on the monotonic clock: the audio path of the agent,
/// exercised without a sound card (`audio.device = "synthetic"`).
public final class SyntheticAudioSource: AudioSource {
    public let sampleRate: Int
    public let channels: Int
    public var name: String { "synthetic" }
    public let frequency: Double
    /// Frames per chunk: 20 ms.
    private let period: Int
    private var start: Timestamp?
    private var produced: Int64 = 0

    public init(sampleRate: Int = 48000, channels: Int = 1, frequency: Double = 440) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.frequency = frequency
        period = max(1, sampleRate / 50)
    }

    public func read() throws(CaptureError) -> AudioChunk? {
        let origin = start ?? Clock.monotonic.now()
        start = origin
        let time =
            origin
            + Timestamp.Duration(nanoseconds: Rational.scale(produced, by: 1_000_000_000, over: Int64(sampleRate)))
        // Deliver the chunk once its last frame has been "captured".
        let ready =
            time
            + Timestamp.Duration(nanoseconds: Rational.scale(Int64(period), by: 1_000_000_000, over: Int64(sampleRate)))
        Clock.sleep(untilMonotonic: ready)
        var data = [UInt8](repeating: 0, count: period * channels * 2)
        let step = 2 * Double.pi * frequency / Double(sampleRate)
        for i in 0..<period {
            let v = Int16(6000 * sinApprox(step * Double(produced + Int64(i))))
            for c in 0..<channels {
                data[(i * channels + c) * 2] = UInt8(truncatingIfNeeded: v)
                data[(i * channels + c) * 2 + 1] = UInt8(truncatingIfNeeded: v >> 8)
            }
        }
        produced += Int64(period)
        return AudioChunk(data: data, time: time, sampleRate: sampleRate, channels: channels)
    }
}

/// sin(x) without Foundation: reduce to [-π, π], then a short Taylor series (error < 1e-6).
func sinApprox(_ x: Double) -> Double {
    let twoPi = 2 * Double.pi
    var r = x - (x / twoPi).rounded(.down) * twoPi
    if r > Double.pi { r -= twoPi }
    let r2 = r * r
    var term = r, sum = r
    for n in stride(from: 2, through: 22, by: 2) {
        term *= -r2 / Double(n * (n + 1))
        sum += term
    }
    return sum
}
