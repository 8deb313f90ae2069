import CALSA
import Capture
import Foundation
import Glibc
import Media
import Synchronization

/// Plays into the playback side of the ALSA loopback (`hw:Loopback,0,0`): silence, then on
/// request a sine tone, and says when on the monotonic clock its first sample is played —
/// which is when it is captured on the other side (`hw:Loopback,1,0`). That instant is the
/// reference the microphone's timestamps are checked against.
final class TonePlayer: Sendable {
    let device: String
    let rate = 48000
    let frequency: Double
    let amplitude = 8000.0
    /// Frames per write and in the playback buffer (matching what the microphone asks for, as
    /// snd-aloop may hold both sides of the cable to the same sizes).
    let period = 480
    let buffer = 24000

    private struct State {
        var running = true
        var toneRequested = false
        var toneFromFrame: Int64?
        var onset: Timestamp?
        var failure: String?
        var underruns = 0
    }
    private let state = Mutex(State())
    private let finished = DispatchSemaphore(value: 0)

    init(device: String = "hw:Loopback,0,0", frequency: Double = 440) {
        self.device = device
        self.frequency = frequency
    }

    func start() {
        let thread = Thread { [self] in
            if let problem = play() { state.withLock { $0.failure = problem } }
            finished.signal()
        }
        thread.name = "tone"
        thread.start()
    }

    /// Starts the tone at the next write; returns when its first sample will be played.
    func startTone(timeout: Double = 5) -> Timestamp? {
        state.withLock { $0.toneRequested = true }
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if let onset = state.withLock({ $0.onset }) { return onset }
            if state.withLock({ $0.failure }) != nil { return nil }
            usleep(2000)
        }
        return nil
    }

    func stop() -> (failure: String?, underruns: Int) {
        state.withLock { $0.running = false }
        finished.wait()
        return state.withLock { ($0.failure, $0.underruns) }
    }

    var failure: String? { state.withLock { $0.failure } }

    /// The playing thread; returns a problem, or nil when stopped.
    private func play() -> String? {
        var pcm: OpaquePointer?
        var rc = snd_pcm_open(&pcm, device, SND_PCM_STREAM_PLAYBACK, 0)
        guard rc >= 0, let pcm else {
            return "cannot open \(device) for playback: \(String(cString: snd_strerror(rc)))"
        }
        defer { if snd_pcm_close(pcm) < 0 { /* released anyway */  } }
        var hw: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&hw) >= 0, let hw else { return "out of memory" }
        defer { snd_pcm_hw_params_free(hw) }
        var actualRate = UInt32(rate), direction: Int32 = 0
        var periodFrames = snd_pcm_uframes_t(period), bufferFrames = snd_pcm_uframes_t(buffer)
        for (what, code) in [
            ("any", snd_pcm_hw_params_any(pcm, hw)),
            ("access", snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED)),
            ("format", snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_S16_LE)),
            ("channels", snd_pcm_hw_params_set_channels(pcm, hw, 1)),
            ("rate", snd_pcm_hw_params_set_rate_near(pcm, hw, &actualRate, &direction)),
            ("period", snd_pcm_hw_params_set_period_size_near(pcm, hw, &periodFrames, &direction)),
            ("buffer", snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &bufferFrames)),
            ("apply", snd_pcm_hw_params(pcm, hw)),
        ] where code < 0 {
            return "playback hw params (\(what)) on \(device): \(String(cString: snd_strerror(code)))"
        }
        guard actualRate == UInt32(rate) else { return "playback runs at \(actualRate) Hz, not \(rate)" }
        var sw: OpaquePointer?
        guard snd_pcm_sw_params_malloc(&sw) >= 0, let sw else { return "out of memory" }
        defer { snd_pcm_sw_params_free(sw) }
        for (what, code) in [
            ("current", snd_pcm_sw_params_current(pcm, sw)),
            ("tstamp mode", snd_pcm_sw_params_set_tstamp_mode(pcm, sw, SND_PCM_TSTAMP_ENABLE)),
            ("tstamp type", snd_pcm_sw_params_set_tstamp_type(pcm, sw, SND_PCM_TSTAMP_TYPE_MONOTONIC)),
            ("start threshold", snd_pcm_sw_params_set_start_threshold(pcm, sw, periodFrames)),
            ("apply", snd_pcm_sw_params(pcm, sw)),
        ] where code < 0 {
            return "playback sw params (\(what)) on \(device): \(String(cString: snd_strerror(code)))"
        }
        let total = Int64(bufferFrames)
        var written: Int64 = 0
        var samples = [Int16](repeating: 0, count: Int(periodFrames))
        while state.withLock({ $0.running }) {
            let toneFrom: Int64? = state.withLock { s in
                if s.toneRequested && s.toneFromFrame == nil && snd_pcm_state(pcm) == SND_PCM_STATE_RUNNING {
                    var available: snd_pcm_uframes_t = 0
                    var stamp = snd_htimestamp_t()
                    if snd_pcm_htimestamp(pcm, &available, &stamp) == 0 {
                        // Frames still queued at `stamp` play before the next one written.
                        let queued = total - Int64(available)
                        let at = Timestamp(nanoseconds: Int64(stamp.tv_sec) * 1_000_000_000 + Int64(stamp.tv_nsec))
                        s.onset = at + .init(frames: queued, rate: Rational(Int64(rate), 1))
                        s.toneFromFrame = written
                    }
                }
                return s.toneFromFrame
            }
            for i in 0..<samples.count {
                let n = written + Int64(i)
                if let toneFrom, n >= toneFrom {
                    samples[i] = Int16(amplitude * sin(2 * Double.pi * frequency * Double(n - toneFrom) / Double(rate)))
                } else {
                    samples[i] = 0
                }
            }
            rc = Int32(
                truncatingIfNeeded: samples.withUnsafeBytes {
                    snd_pcm_writei(pcm, $0.baseAddress, snd_pcm_uframes_t(samples.count))
                })
            if rc == -EPIPE {
                state.withLock { $0.underruns += 1 }
                if snd_pcm_prepare(pcm) < 0 { return "cannot recover playback from an underrun" }
                continue
            }
            if rc < 0 { return "playback write on \(device): \(String(cString: snd_strerror(rc)))" }
            written += Int64(rc)
        }
        return nil
    }
}
