internal import Glibc

/// A call into a device library — V4L2's ioctls, ALSA's snd_pcm_* — named for messages, with
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
        let reason =
            call == .open
            ? call.meaning(of: code, device: device)
            : "\(call.action) failed: \(call.meaning(of: code, device: device))"
        return .cannotOpen(source: device, reason: reason)
    }

    /// The error for a failure while streaming, at frame `frame` (0 for sound).
    func streamError(_ device: String, frame: Int) -> CaptureError {
        let reason = "\(call.action) failed: \(call.meaning(of: code, device: device))"
        return call.meansDeviceLost(code)
            ? .deviceLost(source: device, reason: reason) : .readFailed(source: device, frame: frame, reason: reason)
    }
}
