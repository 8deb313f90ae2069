internal import CALSA
internal import Glibc
import Media
internal import POSIX
import Synchronization

/// The ALSA calls a microphone makes, each with its own reading of the error number.
public enum ALSACall: String, DeviceCall, CaseIterable {
    case open = "snd_pcm_open"
    case access = "snd_pcm_hw_params_set_access"
    case format = "snd_pcm_hw_params_set_format"
    case channels = "snd_pcm_hw_params_set_channels"
    case rate = "snd_pcm_hw_params_set_rate_near"
    case period = "snd_pcm_hw_params_set_period_size_near"
    case buffer = "snd_pcm_hw_params_set_buffer_size_near"
    case hardwareParameters = "snd_pcm_hw_params"
    case softwareParameters = "snd_pcm_sw_params"
    case timestamps = "snd_pcm_sw_params_set_tstamp_type"
    case prepare = "snd_pcm_prepare"
    case start = "snd_pcm_start"
    case wait = "snd_pcm_wait"
    case position = "snd_pcm_htimestamp"
    case read = "snd_pcm_readi"
    case recover = "snd_pcm_recover"

    public var action: String {
        switch self {
        case .open: "opening the capture device (snd_pcm_open)"
        case .access: "asking for interleaved reads (snd_pcm_hw_params_set_access)"
        case .format: "asking for 16-bit little-endian samples (snd_pcm_hw_params_set_format)"
        case .channels: "setting the channel count (snd_pcm_hw_params_set_channels)"
        case .rate: "setting the sample rate (snd_pcm_hw_params_set_rate_near)"
        case .period: "setting the period size (snd_pcm_hw_params_set_period_size_near)"
        case .buffer: "setting the buffer size (snd_pcm_hw_params_set_buffer_size_near)"
        case .hardwareParameters: "applying the hardware parameters (snd_pcm_hw_params)"
        case .softwareParameters: "applying the software parameters (snd_pcm_sw_params)"
        case .timestamps: "asking for monotonic timestamps (snd_pcm_sw_params_set_tstamp_type)"
        case .prepare: "preparing the stream (snd_pcm_prepare)"
        case .start: "starting the capture (snd_pcm_start)"
        case .wait: "waiting for sound (snd_pcm_wait)"
        case .position: "reading the capture position (snd_pcm_htimestamp)"
        case .read: "reading samples (snd_pcm_readi)"
        case .recover: "recovering from an overrun (snd_pcm_recover)"
        }
    }

    /// What the (positive) error number means for this call on `device`, and what to do.
    public func meaning(of code: Int32, device: String) -> String {
        let text = String(cString: snd_strerror(-code)) + (SystemError(code).name.map { " (\($0))" } ?? "")
        switch (self, code) {
        case (.open, ENOENT), (.open, ENODEV), (.open, ENXIO):
            return
                "no such capture device (\(text)) — is the microphone plugged in? `vigil probe` (or `arecord -l`) lists the microphones; use a name such as \"plughw:CARD=Device,DEV=0\""
        case (_, ENODEV), (_, ENXIO):
            return
                "the device is gone (\(text)) — was the microphone unplugged? `vigil probe` lists the microphones there are"
        case (.open, EACCES), (.open, EPERM):
            return "permission denied — is the user in group 'audio'? (sudo usermod -aG audio USER, then log in again)"
        case (.open, EBUSY), (.hardwareParameters, EBUSY):
            return
                "the microphone is busy — another program is recording from it (a hw: device takes one program at a time; find it with `fuser -v /dev/snd/*`)"
        case (.open, EINVAL):
            return "\(text) — \"\(device)\" is not a capture device name ALSA knows (`vigil probe` lists them)"
        case (.access, _), (.format, _):
            return
                "the device cannot deliver 16-bit little-endian interleaved samples (\(text)) — use \"plug\(device.hasPrefix("hw:") ? device : "hw:...")\", which converts"
        case (.channels, _):
            return
                "the device cannot record that many channels (\(text)) — set audio.channels to what `vigil probe` shows, or use a plughw: device"
        case (.rate, _):
            return
                "the device offers no rate near the one asked for (\(text)) — set audio.rate to what `vigil probe` shows, or use a plughw: device"
        case (.timestamps, _):
            return "the device cannot timestamp on the monotonic clock (\(text))"
        case (.read, EIO), (.wait, EIO), (.start, EIO):
            return "I/O error (\(text)) — the microphone stopped delivering sound; check the cable"
        case (.read, EBADFD), (.wait, EBADFD):
            return "the stream is in a state it cannot read from (\(text))"
        default:
            return text
        }
    }
}

/// An ALSA call that failed, with its (positive) error number.
typealias ALSAFailure = DeviceFailure<ALSACall>

/// An open ALSA PCM. Owns the handle: closed in `deinit`.
final class PCMHandle {
    let pcm: OpaquePointer

    /// Opens `device` for `stream` without blocking (a busy hw: device answers EBUSY at once
    /// instead of waiting for the other program).
    init(device: String, stream: snd_pcm_stream_t) throws(ALSAFailure) {
        CALSA_silenceLibraryMessages()
        var handle: OpaquePointer?
        do {
            try retryOnInterrupt(.negatedErrorNumber) { snd_pcm_open(&handle, device, stream, SND_PCM_NONBLOCK) }
        } catch {
            throw ALSAFailure(call: .open, code: error.code)
        }
        guard let handle else { throw ALSAFailure(call: .open, code: ENODEV) }
        pcm = handle
    }

    deinit {
        // The handle is released whatever snd_pcm_close reports; there is nothing to retry.
        if snd_pcm_close(pcm) < 0 { return }
    }

    func call<Result: BinaryInteger>(_ which: ALSACall, _ body: (OpaquePointer) -> Result) throws(ALSAFailure) -> Result
    {
        do { return try retryOnInterrupt(.negatedErrorNumber) { body(pcm) } } catch {
            throw ALSAFailure(call: which, code: error.code)
        }
    }
}

/// An ALSA microphone: 16-bit little-endian interleaved capture with short periods, each
/// chunk timestamped on the monotonic clock the camera uses.
///
/// `read()` returns what has been captured (at least one period), waiting at most
/// `stallTimeout` for it. An overrun (the agent fell behind by more than the buffer) is
/// recovered with `snd_pcm_recover`, counted in `overruns`, and capture goes on; the gap
/// shows in the chunk timestamps, and the movie writer fills it with silence. Any other
/// failure throws, and the caller reopens the device later.
public final class ALSAMicrophone: AudioSource {
    public let name: String
    /// The rate the device runs at (the nearest it offers to the one asked for).
    public let sampleRate: Int
    public let channels: Int
    public let requestedRate: Int
    /// Frames per period (how often the driver wakes the reader) and in the whole buffer.
    public let periodFrames: Int
    public let bufferFrames: Int
    /// How long `read()` waits for sound before it gives up on the device.
    public let stallTimeout: Timestamp.Duration
    /// Whether the driver timestamps on the monotonic clock (else the read time is used).
    public let driverTimestamps: Bool

    /// Overruns recovered so far (readable from any thread).
    public var overruns: Int { overrunCount.load(ordering: .relaxed) }
    private let overrunCount = Atomic<Int>(0)

    private let handle: PCMHandle
    private var timeline: AudioTimeline
    private var lastSound: Timestamp

    /// Opens `device` ("hw:1,0", "plughw:CARD=Device,DEV=0", "default") for capture at the
    /// rate nearest `sampleRate`, with `channels` channels and periods of about `periodSeconds`.
    public init(
        device: String, sampleRate: Int, channels: Int, periodSeconds: Double = 0.01,
        stallTimeout: Timestamp.Duration = .init(seconds: 2)
    ) throws(CaptureError) {
        guard sampleRate > 0, channels > 0 else {
            throw CaptureError.invalidSettings(
                setting: "audio", problem: "a rate of \(sampleRate) Hz with \(channels) channel(s)")
        }
        name = device
        requestedRate = sampleRate
        self.channels = channels
        self.stallTimeout = stallTimeout
        do {
            handle = try PCMHandle(device: device, stream: SND_PCM_STREAM_CAPTURE)
            let hw = try ALSAMicrophone.setHardware(
                handle, rate: sampleRate, channels: channels, periodSeconds: periodSeconds)
            self.sampleRate = hw.rate
            periodFrames = hw.period
            bufferFrames = hw.buffer
            driverTimestamps = try ALSAMicrophone.setSoftware(handle, period: hw.period)
            _ = try handle.call(.prepare) { snd_pcm_prepare($0) }
            _ = try handle.call(.start) { snd_pcm_start($0) }
        } catch {
            throw error.openError(device)
        }
        timeline = AudioTimeline(sampleRate: self.sampleRate)
        lastSound = Clock.monotonic.now()
    }

    private static func setHardware(
        _ handle: PCMHandle, rate: Int, channels: Int, periodSeconds: Double
    ) throws(ALSAFailure) -> (rate: Int, period: Int, buffer: Int) {
        var params: OpaquePointer?
        _ = try handle.call(.hardwareParameters) { _ in snd_pcm_hw_params_malloc(&params) }
        guard let params else { throw ALSAFailure(call: .hardwareParameters, code: ENOMEM) }
        defer { snd_pcm_hw_params_free(params) }
        _ = try handle.call(.hardwareParameters) { snd_pcm_hw_params_any($0, params) }
        _ = try handle.call(.access) { snd_pcm_hw_params_set_access($0, params, SND_PCM_ACCESS_RW_INTERLEAVED) }
        _ = try handle.call(.format) { snd_pcm_hw_params_set_format($0, params, SND_PCM_FORMAT_S16_LE) }
        _ = try handle.call(.channels) { snd_pcm_hw_params_set_channels($0, params, UInt32(clamping: channels)) }
        var actualRate = UInt32(clamping: rate)
        var direction: Int32 = 0
        _ = try handle.call(.rate) { snd_pcm_hw_params_set_rate_near($0, params, &actualRate, &direction) }
        var period = snd_pcm_uframes_t(max(1, Int((Double(actualRate) * periodSeconds).rounded())))
        _ = try handle.call(.period) { snd_pcm_hw_params_set_period_size_near($0, params, &period, &direction) }
        // Half a second of headroom: capture latency is one period whatever the buffer size,
        // and a long buffer rides out a reader that is late (no overrun).
        var buffer = snd_pcm_uframes_t(max(Int(period) * 4, Int(actualRate) / 2))
        _ = try handle.call(.buffer) { snd_pcm_hw_params_set_buffer_size_near($0, params, &buffer) }
        _ = try handle.call(.hardwareParameters) { snd_pcm_hw_params($0, params) }
        return (Int(actualRate), Int(period), Int(buffer))
    }

    /// Timestamps on the monotonic clock; wake the reader each period. Returns whether the
    /// device takes the monotonic timestamp type.
    private static func setSoftware(_ handle: PCMHandle, period: Int) throws(ALSAFailure) -> Bool {
        var params: OpaquePointer?
        _ = try handle.call(.softwareParameters) { _ in snd_pcm_sw_params_malloc(&params) }
        guard let params else { throw ALSAFailure(call: .softwareParameters, code: ENOMEM) }
        defer { snd_pcm_sw_params_free(params) }
        _ = try handle.call(.softwareParameters) { snd_pcm_sw_params_current($0, params) }
        _ = try handle.call(.softwareParameters) {
            snd_pcm_sw_params_set_tstamp_mode($0, params, SND_PCM_TSTAMP_ENABLE)
        }
        var monotonic = true
        do {
            _ = try handle.call(.timestamps) {
                snd_pcm_sw_params_set_tstamp_type($0, params, SND_PCM_TSTAMP_TYPE_MONOTONIC)
            }
        } catch {
            monotonic = false  // a plugin without timestamp types: the read time stands in
        }
        _ = try handle.call(.softwareParameters) {
            snd_pcm_sw_params_set_avail_min($0, params, snd_pcm_uframes_t(period))
        }
        _ = try handle.call(.softwareParameters) { snd_pcm_sw_params($0, params) }
        return monotonic
    }

    public func read() throws(CaptureError) -> AudioChunk? {
        while true {
            do {
                if let chunk = try readAvailable() { return chunk }
            } catch  where error.code == EPIPE || error.code == ESTRPIPE {
                try recover(from: error)
            } catch  where error.code == EAGAIN {
                continue
            } catch {
                throw error.streamError(name, frame: 0)
            }
            if Clock.monotonic.now() - lastSound > stallTimeout {
                throw CaptureError.stalled(source: name, seconds: stallTimeout.seconds)
            }
        }
    }

    /// Waits up to 100 ms for a period, then reads everything captured; nil when nothing came.
    private func readAvailable() throws(ALSAFailure) -> AudioChunk? {
        let ready = try handle.call(.wait) { snd_pcm_wait($0, 100) }
        guard ready > 0 else { return nil }
        var available: snd_pcm_uframes_t = 0
        var stamp = snd_htimestamp_t()
        _ = try handle.call(.position) { snd_pcm_htimestamp($0, &available, &stamp) }
        let now = Clock.monotonic.now()
        let frames = min(Int(available), bufferFrames)
        guard frames > 0 else { return nil }
        let bytesPerFrame = channels * 2
        var data = [UInt8](repeating: 0, count: frames * bytesPerFrame)
        let outcome = data.withUnsafeMutableBytes { bytes in
            Result { () throws(ALSAFailure) in
                try handle.call(.read) { snd_pcm_readi($0, bytes.baseAddress, snd_pcm_uframes_t(frames)) }
            }
        }
        let read = try outcome.get()
        guard read > 0 else { return nil }
        if Int(read) < frames { data.removeLast((frames - Int(read)) * bytesPerFrame) }
        let driverTime =
            driverTimestamps
            ? Timestamp(nanoseconds: Int64(stamp.tv_sec) * 1_000_000_000 + Int64(stamp.tv_nsec)) : .zero
        let measured = AudioTimeline.firstUnreadFrame(
            timestamp: driverTime, available: Int(available), sampleRate: sampleRate, now: now)
        let time = timeline.place(measured: measured, frames: Int(read))
        lastSound = now
        return AudioChunk(data: data, time: time, sampleRate: sampleRate, channels: channels)
    }

    /// After an overrun (EPIPE) or a suspend (ESTRPIPE): prepare the stream again and restart it.
    private func recover(from failure: ALSAFailure) throws(CaptureError) {
        if failure.code == EPIPE { overrunCount.add(1, ordering: .relaxed) }
        timeline.reset()
        do {
            _ = try handle.call(.recover) { snd_pcm_recover($0, -failure.code, 1) }
            if snd_pcm_state(handle.pcm) == SND_PCM_STATE_PREPARED {
                _ = try handle.call(.start) { snd_pcm_start($0) }
            }
        } catch {
            throw error.streamError(name, frame: 0)
        }
    }
}
