internal import Glibc
internal import POSIX

/// The V4L2 calls a camera makes, each with its own reading of `errno`.
///
/// The same number means different things per call (as the v4l2r crate keeps one error type
/// per ioctl): EINVAL from VIDIOC_REQBUFS is "no mmap streaming", from VIDIOC_QUERYCAP "not a
/// V4L2 device", and it simply ends an enumeration.
public enum V4L2Call: String, DeviceCall, CaseIterable {
    case open
    case queryCapabilities = "VIDIOC_QUERYCAP"
    case enumerateFormats = "VIDIOC_ENUM_FMT"
    case enumerateSizes = "VIDIOC_ENUM_FRAMESIZES"
    case enumerateIntervals = "VIDIOC_ENUM_FRAMEINTERVALS"
    case getFormat = "VIDIOC_G_FMT"
    case setFormat = "VIDIOC_S_FMT"
    case cropCapabilities = "VIDIOC_CROPCAP"
    case getParameters = "VIDIOC_G_PARM"
    case setParameters = "VIDIOC_S_PARM"
    case requestBuffers = "VIDIOC_REQBUFS"
    case queryBuffer = "VIDIOC_QUERYBUF"
    case mapBuffer = "mmap"
    case queueBuffer = "VIDIOC_QBUF"
    case streamOn = "VIDIOC_STREAMON"
    case dequeueBuffer = "VIDIOC_DQBUF"
    case streamOff = "VIDIOC_STREAMOFF"
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
        case .cropCapabilities: "reading the pixel shape (VIDIOC_CROPCAP)"
        case .getParameters: "reading the frame rate (VIDIOC_G_PARM)"
        case .setParameters: "setting the frame rate (VIDIOC_S_PARM)"
        case .requestBuffers: "requesting capture buffers (VIDIOC_REQBUFS)"
        case .queryBuffer: "querying a capture buffer (VIDIOC_QUERYBUF)"
        case .mapBuffer: "mapping the capture buffers (mmap)"
        case .queueBuffer: "handing a buffer back to the driver (VIDIOC_QBUF)"
        case .streamOn: "starting the stream (VIDIOC_STREAMON)"
        case .dequeueBuffer: "taking a frame from the driver (VIDIOC_DQBUF)"
        case .streamOff: "stopping the stream (VIDIOC_STREAMOFF)"
        case .poll: "waiting for a frame (poll)"
        }
    }

    /// What `errno` means for this call on `device`, and what to do about it.
    public func meaning(of code: Int32, device: String) -> String {
        let text = SystemError(code).description
        switch (self, code) {
        case (_, ENODEV), (_, ENXIO):
            return
                "the device is gone (\(text)) — was the camera unplugged? Plug it back in; `vigil probe` lists the cameras there are"
        case (.open, ENOENT):
            return "no such device — is the camera plugged in? `vigil probe` lists the cameras there are"
        case (.open, EACCES), (.open, EPERM):
            return "permission denied — is the user in group 'video'? (sudo usermod -aG video USER, then log in again)"
        case (.open, EBUSY), (.setFormat, EBUSY), (.requestBuffers, EBUSY), (.streamOn, EBUSY):
            return "the camera is busy — another program is using it (find it with `fuser \(device)`)"
        case (.open, ENOTDIR), (.open, ELOOP), (.open, ENAMETOOLONG):
            return "\(text) — the path is not a device node such as /dev/video0"
        case (.open, EMFILE), (.open, ENFILE):
            return "\(text) — too many open files in this process or system"
        case (.queryCapabilities, ENOTTY), (.queryCapabilities, EINVAL), (.open, ENOTTY):
            return
                "not a V4L2 video device (\(text)) — camera.device must be a /dev/video* node or a /dev/v4l/by-id/ link to one"
        case (.enumerateFormats, _), (.enumerateSizes, _), (.enumerateIntervals, _):
            return "\(text) — the driver cannot list its modes; try `v4l2-ctl -d \(device) --list-formats-ext`"
        case (.setFormat, EINVAL), (.getFormat, EINVAL):
            return "the driver refused the format (\(text)); `vigil probe \(device)` lists the ones it offers"
        case (.getParameters, ENOTTY), (.getParameters, EINVAL), (.setParameters, ENOTTY), (.setParameters, EINVAL):
            return "the driver does not let the frame rate be set (\(text)); it runs at its own rate"
        case (.requestBuffers, EINVAL):
            return "the driver does not support memory-mapped streaming (\(text)), which Vigil needs"
        case (.requestBuffers, ENOMEM), (.mapBuffer, ENOMEM):
            return "not enough memory for the capture buffers (\(text)) — ask for a smaller picture"
        case (.mapBuffer, _):
            return "\(text) — the capture buffers cannot be mapped into memory"
        case (.streamOn, ENOSPC):
            return
                "not enough USB bandwidth (\(text)) — ask for a smaller size or a lower rate, or plug the camera into another USB port (another bus)"
        case (.streamOn, EPIPE), (.streamOn, ENOLINK):
            return
                "the capture pipeline is not set up (\(text)) — a Raspberry Pi camera module must be used through `libcamerify vigil run ...`"
        case (.streamOn, EIO), (.dequeueBuffer, EIO), (.queueBuffer, EIO):
            return "I/O error (\(text)) — the camera stopped delivering frames; check the cable and its power supply"
        case (.dequeueBuffer, EPIPE):
            return "the driver ended the stream (\(text))"
        case (.dequeueBuffer, EINVAL), (.queueBuffer, EINVAL):
            return "the stream is not running any more (\(text))"
        default:
            return text
        }
    }

    /// Whether `errno` from this call means the camera itself went away or broke (reopen it
    /// later) rather than a setting that cannot work.
    /// A streaming call also ends the stream on EPIPE or EINVAL (the driver stopped it).
    public func meansDeviceLost(_ code: Int32) -> Bool {
        Self.deviceGone(code) || ((code == EPIPE || code == EINVAL) && (self == .dequeueBuffer || self == .queueBuffer))
    }
}

/// A V4L2 call that failed, with its errno.
typealias V4L2Failure = DeviceFailure<V4L2Call>
