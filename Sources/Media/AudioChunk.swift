/// A run of captured sound: interleaved 16-bit little-endian PCM sample frames, with the
/// capture time of the first frame on the same monotonic clock as the video.
public struct AudioChunk: Hashable, Sendable {
    public var data: [UInt8]
    /// When the first sample frame was captured.
    public var time: Timestamp
    public var sampleRate: Int
    public var channels: Int

    public init(data: [UInt8], time: Timestamp, sampleRate: Int, channels: Int) {
        precondition(sampleRate > 0 && channels > 0, "audio needs a sample rate and channels")
        self.data = data
        self.time = time
        self.sampleRate = sampleRate
        self.channels = channels
    }

    public var bytesPerFrame: Int { channels * 2 }
    public var frames: Int { data.count / bytesPerFrame }
    /// The capture time just after the last sample frame.
    public var end: Timestamp { time + Timestamp.Duration(frames: frames, sampleRate: sampleRate) }

    /// Splits the chunk at `instant`: the frames captured before it, and those from it on.
    /// Either part is nil when empty.
    public func split(at instant: Timestamp) -> (before: AudioChunk?, after: AudioChunk?) {
        if instant <= time { return (nil, self) }
        if instant >= end { return (self, nil) }
        let cut = (instant - time).frames(sampleRate: sampleRate)
        guard cut > 0 else { return (nil, self) }
        guard cut < frames else { return (self, nil) }
        let bytes = cut * bytesPerFrame
        let before = AudioChunk(data: Array(data[..<bytes]), time: time, sampleRate: sampleRate, channels: channels)
        let after = AudioChunk(
            data: Array(data[bytes...]), time: time + Timestamp.Duration(frames: cut, sampleRate: sampleRate),
            sampleRate: sampleRate, channels: channels)
        return (before, after)
    }
}
