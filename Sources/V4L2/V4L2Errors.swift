internal import Glibc
internal import POSIX

/// What a V4L2 node is used as: a camera (through libv4l2) or a memory-to-memory encoder
/// (straight to the kernel). The same error number gets advice for the one it is.
public enum V4L2Role: Hashable, Sendable {
    case camera
    case encoder
}

/// The V4L2 calls Vigil makes, each with its own reading of `errno`: the one vocabulary of
/// V4L2 errors, for the cameras (Capture) and the hardware encoder (H264) alike.
///
/// The same number means different things per call (as the v4l2r crate keeps one error type
/// per ioctl): EINVAL from VIDIOC_REQBUFS is "no mmap streaming", from VIDIOC_QUERYCAP "not a
/// V4L2 device", and it simply ends an enumeration.
public enum V4L2Call: String, Hashable, Sendable, CaseIterable {
    case open
    case queryCapabilities = "VIDIOC_QUERYCAP"
    case enumerateFormats = "VIDIOC_ENUM_FMT"
    case enumerateSizes = "VIDIOC_ENUM_FRAMESIZES"
    case enumerateIntervals = "VIDIOC_ENUM_FRAMEINTERVALS"
    case getFormat = "VIDIOC_G_FMT"
    case setFormat = "VIDIOC_S_FMT"
    case setSelection = "VIDIOC_S_SELECTION"
    case cropCapabilities = "VIDIOC_CROPCAP"
    case getParameters = "VIDIOC_G_PARM"
    case setParameters = "VIDIOC_S_PARM"
    case queryControl = "VIDIOC_QUERYCTRL"
    case setControl = "VIDIOC_S_CTRL"
    case requestBuffers = "VIDIOC_REQBUFS"
    case queryBuffer = "VIDIOC_QUERYBUF"
    case mapBuffer = "mmap"
    case queueBuffer = "VIDIOC_QBUF"
    case streamOn = "VIDIOC_STREAMON"
    case dequeueBuffer = "VIDIOC_DQBUF"
    case streamOff = "VIDIOC_STREAMOFF"
    case encoderCommand = "VIDIOC_ENCODER_CMD"
    case poll

    /// What the call was doing, for messages ("setting the format").
    public var action: String {
        switch self {
        case .open: "opening the device"
        case .queryCapabilities: "asking what the device is (VIDIOC_QUERYCAP)"
        case .enumerateFormats: "listing its pixel formats (VIDIOC_ENUM_FMT)"
        case .enumerateSizes: "listing its picture sizes (VIDIOC_ENUM_FRAMESIZES)"
        case .enumerateIntervals: "listing its frame rates (VIDIOC_ENUM_FRAMEINTERVALS)"
        case .getFormat: "reading the format back (VIDIOC_G_FMT)"
        case .setFormat: "setting the format (VIDIOC_S_FMT)"
        case .setSelection: "setting the picture's crop (VIDIOC_S_SELECTION)"
        case .cropCapabilities: "reading the pixel shape (VIDIOC_CROPCAP)"
        case .getParameters: "reading the frame rate (VIDIOC_G_PARM)"
        case .setParameters: "setting the frame rate (VIDIOC_S_PARM)"
        case .queryControl: "asking for a control (VIDIOC_QUERYCTRL)"
        case .setControl: "setting a control (VIDIOC_S_CTRL)"
        case .requestBuffers: "requesting buffers (VIDIOC_REQBUFS)"
        case .queryBuffer: "querying a buffer (VIDIOC_QUERYBUF)"
        case .mapBuffer: "mapping the buffers (mmap)"
        case .queueBuffer: "handing a buffer back to the driver (VIDIOC_QBUF)"
        case .streamOn: "starting the stream (VIDIOC_STREAMON)"
        case .dequeueBuffer: "taking a frame from the driver (VIDIOC_DQBUF)"
        case .streamOff: "stopping the stream (VIDIOC_STREAMOFF)"
        case .encoderCommand: "telling the encoder to finish (VIDIOC_ENCODER_CMD)"
        case .poll: "waiting for a frame (poll)"
        }
    }

    /// What `errno` means for this call on a camera at `device`, and what to do about it.
    public func meaning(of code: Int32, device: String) -> String {
        meaning(of: code, device: device, role: .camera)
    }

    /// What `errno` means for this call on `device`, used as `role`, and what to do about it.
    public func meaning(of code: Int32, device: String, role: V4L2Role) -> String {
        let text = SystemError(code).description
        switch (role, self, code) {
        case (.camera, _, ENODEV), (.camera, _, ENXIO):
            return
                "the device is gone (\(text)) — was the camera unplugged? Plug it back in; `vigil probe` lists the cameras there are"
        case (.encoder, _, ENODEV), (.encoder, _, ENXIO):
            return "the device is gone (\(text)) — was its driver unloaded?"
        case (.encoder, _, ENOMEM):
            return
                "out of memory for its buffers (\(text)) — give the board more contiguous memory: a larger cma= on the kernel command line, or a larger cma- setting of dtoverlay=vc4-kms-v3d in config.txt, then reboot (other programs holding camera or encoder buffers use the same pool)"
        case (.encoder, _, EBUSY):
            return "the device is busy (\(text)) — another program uses it (find it with `fuser \(device)`)"
        case (.encoder, .open, ENOENT):
            return "no such device — `vigil probe` lists the hardware encoders there are"
        case (_, .open, ENOENT):
            return "no such device — is the camera plugged in? `vigil probe` lists the cameras there are"
        case (_, .open, EACCES), (_, .open, EPERM), (.encoder, _, EACCES), (.encoder, _, EPERM):
            return "permission denied — is the user in group 'video'? (sudo usermod -aG video USER, then log in again)"
        case (_, .open, EBUSY), (_, .setFormat, EBUSY), (_, .requestBuffers, EBUSY), (_, .streamOn, EBUSY):
            return "the camera is busy — another program is using it (find it with `fuser \(device)`)"
        case (_, .open, ENOTDIR), (_, .open, ELOOP), (_, .open, ENAMETOOLONG):
            return "\(text) — the path is not a device node such as /dev/video0"
        case (_, .open, EMFILE), (_, .open, ENFILE):
            return "\(text) — too many open files in this process or system"
        case (.encoder, .queryCapabilities, ENOTTY), (.encoder, .queryCapabilities, EINVAL), (.encoder, .open, ENOTTY):
            return
                "not a V4L2 video device (\(text)) — encoder.device must be a /dev/video* node of a hardware encoder; `vigil probe` lists them"
        case (_, .queryCapabilities, ENOTTY), (_, .queryCapabilities, EINVAL), (_, .open, ENOTTY):
            return
                "not a V4L2 video device (\(text)) — camera.device must be a /dev/video* node or a /dev/v4l/by-id/ link to one"
        case (_, .enumerateFormats, _), (_, .enumerateSizes, _), (_, .enumerateIntervals, _):
            return "\(text) — the driver cannot list its modes; try `v4l2-ctl -d \(device) --list-formats-ext`"
        case (_, .setFormat, EINVAL), (_, .getFormat, EINVAL):
            return "the driver refused the format (\(text)); `vigil probe \(device)` lists the ones it offers"
        case (_, .getParameters, ENOTTY), (_, .getParameters, EINVAL), (_, .setParameters, ENOTTY),
            (_, .setParameters, EINVAL):
            return "the driver does not let the frame rate be set (\(text)); it runs at its own rate"
        case (_, .requestBuffers, EINVAL):
            return "the driver does not support memory-mapped streaming (\(text)), which Vigil needs"
        case (_, .requestBuffers, ENOMEM), (_, .mapBuffer, ENOMEM):
            return "not enough memory for the capture buffers (\(text)) — ask for a smaller picture"
        case (_, .mapBuffer, _):
            return "\(text) — the buffers cannot be mapped into memory"
        case (.camera, .streamOn, ENOSPC):
            return
                "not enough USB bandwidth (\(text)) — ask for a smaller size or a lower rate, or plug the camera into another USB port (another bus)"
        case (.camera, .streamOn, EPIPE), (.camera, .streamOn, ENOLINK):
            return
                "the capture pipeline is not set up (\(text)) — a Raspberry Pi camera module must be used through `libcamerify vigil run ...`"
        case (.camera, .streamOn, EIO), (.camera, .dequeueBuffer, EIO), (.camera, .queueBuffer, EIO):
            return "I/O error (\(text)) — the camera stopped delivering frames; check the cable and its power supply"
        case (_, .dequeueBuffer, EPIPE):
            return "the driver ended the stream (\(text))"
        case (_, .dequeueBuffer, EINVAL), (_, .queueBuffer, EINVAL):
            return "the stream is not running any more (\(text))"
        default:
            return text
        }
    }

    /// Whether `errno` means the device itself went away or broke (reopen it later) rather
    /// than a setting that cannot work, whatever the call: unplugged (ENODEV, ENXIO), an I/O
    /// error or shut down. (libcamera's plugin reports a lost camera with the same codes.)
    public static func deviceGone(_ code: Int32) -> Bool {
        code == ENODEV || code == ENXIO || code == EIO || code == ESHUTDOWN
    }

    /// Whether `errno` from this call means the device went away or broke (`deviceGone`); a
    /// streaming call also ends the stream on EPIPE or EINVAL (the driver stopped it).
    public func meansDeviceLost(_ code: Int32) -> Bool {
        Self.deviceGone(code) || ((code == EPIPE || code == EINVAL) && (self == .dequeueBuffer || self == .queueBuffer))
    }
}

/// A V4L2 call that failed on a device: the call, its `errno` (0 when the device answered but
/// cannot do what Vigil needs), and what that means, with what to do.
public struct V4L2Error: Error, Hashable, Sendable, CustomStringConvertible {
    /// The node, as the user named it.
    public let device: String
    public let call: V4L2Call
    /// The error number; 0 when the call worked and its answer is the problem.
    public let code: Int32
    public let role: V4L2Role
    /// What is wrong and what to do: the call's meaning of `code`, or the problem given.
    public let problem: String

    /// A call that failed with `code`; the problem is what `code` means for the call.
    public init(device: String, call: V4L2Call, code: Int32, role: V4L2Role) {
        self.init(
            device: device, call: call, code: code, role: role,
            problem: call.meaning(of: code, device: device, role: role))
    }

    /// A call whose answer is the problem (the device is not what Vigil needs), or a failure
    /// with words of its own.
    public init(device: String, call: V4L2Call, code: Int32 = 0, role: V4L2Role, problem: String) {
        self.device = device
        self.call = call
        self.code = code
        self.role = role
        self.problem = problem
    }

    /// "/dev/video11: requesting buffers (VIDIOC_REQBUFS) failed: out of memory …", or, for a
    /// device that is not what Vigil needs, "/dev/video11: …".
    public var description: String {
        code == 0 ? "\(device): \(problem)" : "\(device): \(call.action) failed: \(problem)"
    }

    /// Whether the device itself went away or broke (see `V4L2Call.meansDeviceLost`).
    public var meansDeviceLost: Bool { code != 0 && call.meansDeviceLost(code) }
}
