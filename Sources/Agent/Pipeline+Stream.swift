import Capture
import Configuration
import FoundationEssentials
import Logging
import Media
import Overlay
import QuickTime
import Recorder

/// The stream: its encoder (the hardware one while it works, x264 otherwise), the overlay made
/// for its picture, and the mapping of its capture times to the wall clock.
extension Pipeline {
    /// Creates the encoder for the source's negotiated format and tells the writer about the stream.
    func start(with frame: VideoFrame) throws(EncoderError) {
        let format = frame.format
        let now = wallNow()
        let captured = Pipeline.wallClockOfCapture(
            frame.timestamp, now: now, monotonicNow: clock.now(),
            monotonicTimestamps: Pipeline.hasMonotonicTimestamps(settings.camera.device))
        let encoder = try makeEncoder(for: format)
        self.encoder = encoder
        makeOverlay(height: format.height)
        keyframes = KeyframeSchedule(interval: keyframes.interval)
        // After an interruption the origin stays that of the source's very first frame.
        let origin =
            streamInfo.map { ($0.firstFrame, $0.wallAtFirstFrame, $0.onMonotonicClock) }
            ?? (frame.timestamp, captured ?? now, captured != nil)
        if firstFrame == nil { firstFrame = frame.timestamp }
        var aspect: PixelAspectRatio?
        if let par = format.pixelAspectRatio, par.numerator != par.denominator, par.numerator > 0,
            let h = UInt32(exactly: par.numerator), let v = UInt32(exactly: par.denominator)
        {
            aspect = PixelAspectRatio(horizontalSpacing: h, verticalSpacing: v)
        }
        let video = VideoTrackFormat(
            width: format.width, height: format.height,
            sequenceParameterSet: encoder.sequenceParameterSet, pictureParameterSet: encoder.pictureParameterSet,
            rotation: settings.camera.rotation, pixelAspectRatio: aspect,
            color: format.height >= 720 ? .bt709 : .bt601)
        let info = StreamInfo(
            video: video, audio: audioFormat, firstFrame: origin.0, wallAtFirstFrame: origin.1,
            onMonotonicClock: origin.2)
        streamInfo = info
        emit(.stream(info))
        heard = HeardSound()
        heardByFrame = HeardSound()
        do {
            outputs.append(.live(.begin(try LiveMovie(video: video))))
            outputs.append(.live(.wallClock(info.wallClock(.zero).timeIntervalSince1970)))
        } catch {
            log.warning("no live view of this stream", [("error", .string(error.description))])
        }
        notify(
            .encoding(
                width: format.width, height: format.height, pixelFormat: format.pixelFormat.description,
                encoder: encoder.logDescription.map { Notice.Fact($0.name, $0.value) },
                keyframeInterval: keyframes.interval.seconds))
    }

    /// The overlay for a picture `height` lines high (as stored: the text is drawn turned
    /// against `camera.rotation`, so that it reads upright as shown), as `overlay.*` says, in
    /// the font the settings read (none when it cannot be made: said once, and recording goes
    /// on without it).
    func makeOverlay(height: Int) {
        let o = settings.overlay
        guard o.enabled, let font = o.font else {
            overlay = nil
            return
        }
        do {
            let drawer = try TextOverlay(
                font: font, position: o.position, scale: o.scale(forHeight: height),
                rotation: settings.camera.rotation)
            overlay = (drawer, OverlayText(pattern: o.text, camera: settings.camera.name))
        } catch {
            overlay = nil
            log.error("no text on the picture: the overlay cannot be made", [("error", .string(error.description))])
        }
    }

    /// The hardware encoder while it is used, x264 otherwise. A hardware encoder that cannot
    /// open is given up for x264, with a warning — except for the first stream when it was
    /// asked for by name (`encoder.backend = "v4l2"`): then the agent stops with the error.
    func makeEncoder(for format: VideoFormat) throws(EncoderError) -> any VideoEncoder {
        if let hardware = encoders.preferred, !hardwareGivenUp {
            do { return try hardware.makeEncoder(for: format) } catch {
                if encoders.required && streamInfo == nil { throw error }
                hardwareGivenUp = true
                notify(.hardwareEncoderCannotOpen(error: error.description))
            }
        }
        return try encoders.fallback.makeEncoder(for: format)
    }

    /// The hardware encoder failed: the clip is closed, and the next frame opens the encoder
    /// again — x264 once `EncoderFailures` gives the hardware one up.
    func hardwareFailed(_ error: EncoderError) {
        let verdict = hardwareFailures.failed(at: clock.now())
        notify(.hardwareEncoderFailed(error: error.description, failuresIn10Minutes: hardwareFailures.recent.count))
        if encoder != nil { interrupt() }
        encoder = nil
        if verdict == .giveUp && !hardwareGivenUp {
            hardwareGivenUp = true
            notify(.hardwareEncoderGivenUp(failures: hardwareFailures.limit))
        }
    }

    /// Cameras and the synthetic scene stamp frames with the monotonic clock when they are
    /// captured; a file's frames count from zero.
    static func hasMonotonicTimestamps(_ source: SourceSpecifier) -> Bool {
        if case .file = source { false } else { true }
    }

    /// The wall-clock time a frame stamped `timestamp` was captured, for a source on the
    /// monotonic clock: `now` less how long ago it was captured (clip names, creation times and
    /// trigger times then say when things happened, not when the pipeline got to them). Nil
    /// for a file, or a timestamp that does not look like the monotonic clock (then `now` it is).
    static func wallClockOfCapture(
        _ timestamp: Timestamp, now: Date, monotonicNow: Timestamp, monotonicTimestamps: Bool
    ) -> Date? {
        let age = (monotonicNow - timestamp).seconds
        guard monotonicTimestamps, age >= 0, age < 10 else { return nil }
        return now.addingTimeInterval(-age)
    }

    /// How far the wall clock may drift from the stream's mapping before it is taken again.
    static let wallClockTolerance = 1.0

    /// Clip names and times map capture times to the wall clock as it read when the stream
    /// began. When it has moved since (NTP stepped it: a board without a clock battery boots
    /// with a stale time), the mapping is taken again before an event starts, and the writer
    /// told — a stream on the monotonic clock only (a file's times are its own).
    func followWallClock() {
        guard let stream = streamInfo, stream.onMonotonicClock else { return }
        let drift = wallNow().timeIntervalSince(stream.wallClock(clock.now()))
        guard abs(drift) > Pipeline.wallClockTolerance else { return }
        var moved = stream
        moved.wallAtFirstFrame = stream.wallAtFirstFrame.addingTimeInterval(drift)
        streamInfo = moved
        emit(.stream(moved))
        notify(.wallClockMoved(seconds: drift))
    }
}
