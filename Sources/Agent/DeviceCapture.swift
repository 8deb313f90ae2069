import Capture
import Configuration
import Logging
import Media

/// The camera as the capture thread reads it, as steps on the clock: its frames (turned 4:2:0)
/// while it delivers; when it is lost, or missing at start, tries to open it again as `Retry`
/// says (1 s after the loss, then 2, 4 … up to 30 s apart) — each change said once, its return
/// with how long it was away and the tries it took. A source that is not a camera (a file, the
/// synthetic scene) is not retried: its failure ends the stream.
///
/// `next` does what is due at the time it is given; the capture thread waits (the stop ends
/// the wait) when told to, a stepped test (`EmbeddedAgent`) moves its clock instead.
final class CameraCapture {
    /// What the capture thread does next.
    enum Step {
        /// A frame for the pipeline, and how many the source skipped before it (gaps in its
        /// sequence numbers).
        case frame(VideoFrame, lostBefore: Int)
        /// The camera went away (said): the open clip is closed; it is tried again.
        case interrupted
        /// The camera is open again, or at last (said): its frames follow.
        case opened
        /// Nothing to do before `until`: the next try to open the camera.
        case wait(until: Timestamp)
        /// No more frames: the end of a file, a source that failed, a camera that needs the
        /// agent restarted.
        case end(CaptureError?)
    }

    private enum State {
        case reading(any FrameSource, PlanarConverter, lastSequence: UInt64?)
        /// Not open: tried again at `nextTry`; `firstTime` until it has been open once.
        case closed(nextTry: Timestamp, firstTime: Bool)
        case ended
    }

    private var state: State
    private var retry = Retry(maximum: .init(seconds: 30))
    private let isCamera: Bool
    private let open: () throws(CaptureError) -> any FrameSource
    private let log: Logger
    private let notify: (Notice) -> Void

    /// Reads `first`, opened at start (`openAtStart`); nil: the camera was not there, and is
    /// tried again a second after `now`. `open` opens it again; what changes is said through
    /// `notify`.
    init(
        first: (any FrameSource)?, isCamera: Bool, open: @escaping () throws(CaptureError) -> any FrameSource,
        log: Logger, notify: @escaping (Notice) -> Void, at now: Timestamp
    ) {
        self.isCamera = isCamera
        self.open = open
        self.log = log
        self.notify = notify
        if let first {
            state = .reading(first, PlanarConverter(input: first.format), lastSequence: nil)
        } else {
            state = .closed(nextTry: now + retry.failed(at: now).retryIn, firstTime: true)
        }
    }

    /// True while the camera delivers no frames (lost, or not there yet).
    var isDown: Bool {
        if case .closed = state { true } else { false }
    }

    /// The source opened when the agent starts: a camera that is not there is said
    /// (`cameraUnavailable`) and waited for (nil); any other source that cannot open is an
    /// error, thrown.
    static func openAtStart(
        _ camera: Settings.Camera, open: () throws(CaptureError) -> OpenedSource, notify: (Notice) -> Void
    ) throws(CaptureError) -> OpenedSource? {
        do { return try open() } catch {
            guard camera.device.isCamera else { throw error }
            notify(.cameraUnavailable(source: camera.device.description, error: error.description))
            return nil
        }
    }

    /// What to do at `now`: the next frame (the source's read may block until it comes), or
    /// a try to open the camera when one is due.
    func next(at now: Timestamp) -> Step {
        switch state {
        case .ended:
            return .end(nil)
        case .closed(let nextTry, let firstTime):
            if now < nextTry { return .wait(until: nextTry) }
            do {
                let source = try open()
                let back = retry.succeeded(at: now)
                let attempts = back?.tries ?? 1
                let name = source.name, format = source.format.description
                notify(
                    firstTime
                        ? .cameraOpen(source: name, format: format, attempts: attempts)
                        : .cameraBack(source: name, format: format, down: back?.down.seconds ?? 0, attempts: attempts))
                state = .reading(source, PlanarConverter(input: source.format), lastSequence: nil)
                return .opened
            } catch {
                let failure = retry.failed(at: now)
                log.debug(
                    "camera still unavailable",
                    [("error", .string(error.description)), ("retry_in", .seconds(failure.retryIn.seconds))])
                state = .closed(nextTry: now + failure.retryIn, firstTime: firstTime)
                return .wait(until: now + failure.retryIn)
            }
        case .reading(let source, let converter, let lastSequence):
            let frame: VideoFrame?
            do { frame = try source.nextFrame().map { converter.convert($0) } } catch {
                state = .ended
                guard isCamera else {
                    log.error(
                        "reading the source failed",
                        [("source", .string(source.name)), ("error", .string(error.description))])
                    return .end(error)
                }
                let restart = if case .needsRestart = error { true } else { false }
                notify(.cameraLost(source: source.name, error: error.description, restart: restart))
                if restart { return .end(error) }
                state = .closed(nextTry: now + retry.failed(at: now).retryIn, firstTime: false)
                return .interrupted
            }
            guard let frame else {
                state = .ended
                notify(.endOfSource(source: source.name))
                return .end(nil)
            }
            let lost = lastSequence.map { frame.sequence > $0 + 1 ? Int(frame.sequence - $0 - 1) : 0 } ?? 0
            state = .reading(source, converter, lastSequence: frame.sequence)
            return .frame(frame, lostBefore: lost)
        }
    }
}

/// The microphone as the audio thread reads it, as steps on the clock: its chunks while it
/// works; one that cannot be opened or fails is tried again as `Retry` says (1 s, doubling to
/// 60 s), each change said once. Clips have no sound meanwhile.
final class MicrophoneCapture {
    /// What the audio thread does next.
    enum Step {
        /// Sound for the pipeline.
        case chunk(AudioChunk)
        /// Nothing to do before `until`: the next try to open the microphone.
        case wait(until: Timestamp)
    }

    private enum State {
        /// Not open: tried at `nextTry` (nil: now).
        case closed(nextTry: Timestamp?)
        /// Open, with the overruns of microphones opened before it (the count only grows).
        case reading(any AudioSource, overrunsBefore: Int)
    }

    private var state = State.closed(nextTry: nil)
    private var retry = Retry(maximum: .init(seconds: 60))
    private let settings: Settings.Audio
    private let open: (Settings.Audio, Logger) throws(CaptureError) -> any AudioSource
    private let stats: Stats
    private let log: Logger
    private let notify: (Notice) -> Void

    init(
        _ settings: Settings.Audio, open: @escaping (Settings.Audio, Logger) throws(CaptureError) -> any AudioSource,
        stats: Stats, log: Logger, notify: @escaping (Notice) -> Void
    ) {
        self.settings = settings
        self.open = open
        self.stats = stats
        self.log = log
        self.notify = notify
    }

    /// What to do at `now`: the next chunk (the microphone's read blocks until it comes), or a
    /// try to open it when one is due.
    func next(at now: Timestamp) -> Step {
        while true {
            switch state {
            case .closed(let nextTry):
                if let nextTry, now < nextTry { return .wait(until: nextTry) }
                let microphone: any AudioSource
                do { microphone = try open(settings, log) } catch {
                    let failure = retry.failed(at: now)
                    if failure.isFirst {
                        notify(.microphoneUnavailable(device: settings.device, error: error.description))
                    }
                    state = .closed(nextTry: now + failure.retryIn)
                    return .wait(until: now + failure.retryIn)
                }
                let wasFailing = retry.succeeded(at: now) != nil
                notify(
                    .microphoneOpen(
                        device: microphone.name, rate: microphone.sampleRate, channels: microphone.channels,
                        back: wasFailing))
                state = .reading(microphone, overrunsBefore: stats.snapshot.audioOverruns)
            case .reading(let microphone, let overrunsBefore):
                do {
                    // Ended (a file): opened again at once.
                    guard let chunk = try microphone.read() else {
                        state = .closed(nextTry: nil)
                        continue
                    }
                    let total = overrunsBefore + microphone.overruns
                    stats.update { $0.audioOverruns = total }
                    return .chunk(chunk)
                } catch {
                    notify(.microphoneFailed(device: microphone.name, error: error.description))
                    let retryIn = retry.failed(at: now).retryIn
                    state = .closed(nextTry: now + retryIn)
                    return .wait(until: now + retryIn)
                }
            }
        }
    }
}
