internal import Glibc
import V4L2

/// A call into a device library — ALSA's snd_pcm_* (V4L2 has its own, `V4L2Call`) — named for messages, with
/// words for what each error number means for it.
protocol DeviceCall: Hashable, Sendable {
    /// The call that opens the device.
    static var open: Self { get }
    /// What the call was doing: "setting the format (VIDIOC_S_FMT)".
    var action: String { get }
    /// What `code` means for this call on `device`, and what to do about it.
    func meaning(of code: Int32, device: String) -> String
    /// Whether `code` means the device itself went away or broke (reopen it later) rather than
    /// a setting that cannot work.
    func meansDeviceLost(_ code: Int32) -> Bool
}

extension DeviceCall {
    /// The error numbers that mean the device itself is gone or broken, whatever the call:
    /// unplugged (ENODEV, ENXIO), an I/O error, or shut down.
    static func deviceGone(_ code: Int32) -> Bool {
        code == ENODEV || code == ENXIO || code == EIO || code == ESHUTDOWN
    }

    func meansDeviceLost(_ code: Int32) -> Bool { Self.deviceGone(code) }
}

/// A device call that failed, with its (positive) error number.
struct DeviceFailure<Call: DeviceCall>: Error, Hashable, Sendable {
    let call: Call
    let code: Int32

    /// The error for opening `device`: why, and what to do.
    func openError(_ device: String) -> CaptureError {
        .failedOpening(
            device, inOpen: call == .open, action: call.action, problem: call.meaning(of: code, device: device))
    }

    /// The error for a failure while streaming, at frame `frame` (0 for sound).
    func streamError(_ device: String, frame: Int) -> CaptureError {
        .failedStreaming(
            device, frame: frame, lost: call.meansDeviceLost(code), action: call.action,
            problem: call.meaning(of: code, device: device))
    }
}

extension V4L2Error {
    /// The error for opening the camera: why, and what to do.
    func openError() -> CaptureError {
        .failedOpening(device, inOpen: call == .open, action: call.action, problem: problem)
    }

    /// The error for a failure while streaming, at frame `frame`.
    func streamError(frame: Int) -> CaptureError {
        .failedStreaming(device, frame: frame, lost: meansDeviceLost, action: call.action, problem: problem)
    }
}

extension CaptureError {
    /// A device that failed to open: the problem alone when the open call failed, else what
    /// was being done and the problem.
    static func failedOpening(_ device: String, inOpen: Bool, action: String, problem: String) -> CaptureError {
        .cannotOpen(source: device, reason: inOpen ? problem : "\(action) failed: \(problem)")
    }

    /// A device that failed while streaming: lost (open it again later) or one bad read.
    static func failedStreaming(
        _ device: String, frame: Int, lost: Bool, action: String, problem: String
    ) -> CaptureError {
        let reason = "\(action) failed: \(problem)"
        return lost
            ? .deviceLost(source: device, reason: reason) : .readFailed(source: device, frame: frame, reason: reason)
    }
}
