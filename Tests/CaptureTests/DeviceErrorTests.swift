import Capture
import Glibc
import Media
import Testing
import V4L2

/// Each errno gets a meaning per call, and the message says what to do.
@Suite struct DeviceErrorTests {
    @Test(arguments: [
        (V4L2Call.open, ENOENT, "no such device — is the camera plugged in?"),
        (.open, EACCES, "permission denied — is the user in group 'video'?"),
        (.open, EBUSY, "the camera is busy — another program is using it (find it with `fuser /dev/video0`)"),
        (.open, ENODEV, "the device is gone"),
        (.queryCapabilities, ENOTTY, "not a V4L2 video device"),
        (.open, ENOTTY, "not a V4L2 video device"),
        (.setFormat, EBUSY, "another program is using it"),
        (.setFormat, EINVAL, "the driver refused the format"),
        (.requestBuffers, EINVAL, "does not support memory-mapped streaming"),
        (.streamOn, ENOSPC, "not enough USB bandwidth"),
        (.streamOn, EPIPE, "libcamerify vigil run"),
        (.dequeueBuffer, ENODEV, "was the camera unplugged?"),
        (.dequeueBuffer, EIO, "check the cable"),
    ])
    func v4l2Meanings(call: V4L2Call, code: Int32, expected: String) {
        let text = call.meaning(of: code, device: "/dev/video0")
        #expect(text.contains(expected), "\(call) errno \(code): \(text)")
    }

    @Test func theSameNumberMeansDifferentThingsPerCall() {
        let fromReqbufs = V4L2Call.requestBuffers.meaning(of: EINVAL, device: "/dev/video0")
        let fromQuerycap = V4L2Call.queryCapabilities.meaning(of: EINVAL, device: "/dev/video0")
        let fromFormat = V4L2Call.setFormat.meaning(of: EINVAL, device: "/dev/video0")
        #expect(Set([fromReqbufs, fromQuerycap, fromFormat]).count == 3)
        // An unplug reads the same from every call.
        for call in V4L2Call.allCases {
            #expect(call.meaning(of: ENODEV, device: "/dev/video0").hasPrefix("the device is gone"))
        }
    }

    @Test func whatCountsAsALostDevice() {
        #expect(V4L2Call.dequeueBuffer.meansDeviceLost(ENODEV))
        #expect(V4L2Call.dequeueBuffer.meansDeviceLost(EIO))
        #expect(V4L2Call.dequeueBuffer.meansDeviceLost(EPIPE))
        #expect(V4L2Call.queueBuffer.meansDeviceLost(EINVAL))
        #expect(!V4L2Call.setFormat.meansDeviceLost(EINVAL))
        #expect(!V4L2Call.open.meansDeviceLost(EACCES))
    }

    @Test(arguments: [
        (ALSACall.open, ENOENT, "no such capture device"),
        (.open, ENODEV, "is the microphone plugged in?"),
        (.open, EBUSY, "the microphone is busy"),
        (.open, EACCES, "is the user in group 'audio'?"),
        (.format, EINVAL, "use \"plughw:1,0\", which converts"),
        (.channels, EINVAL, "set audio.channels"),
        (.read, ENODEV, "was the microphone unplugged?"),
        (.read, EIO, "check the cable"),
    ])
    func alsaMeanings(call: ALSACall, code: Int32, expected: String) {
        let text = call.meaning(of: code, device: "hw:1,0")
        #expect(text.contains(expected), "\(call) error \(code): \(text)")
    }

    @Test func openingWhatIsNotThereSaysWhatToDo() {
        #expect(
            throws: CaptureError.cannotOpen(
                source: "/nonexistent/video7",
                reason: "no such device — is the camera plugged in? `vigil probe` lists the cameras there are")
        ) {
            _ = try V4L2Camera(path: "/nonexistent/video7", request: CameraRequest(width: 640, height: 480, fps: 30))
        }
    }

    /// /dev/null opens, but is no V4L2 device.
    @Test func openingSomethingElseSaysItIsNotACamera() {
        do {
            _ = try V4L2Camera(path: "/dev/null", request: CameraRequest(width: 640, height: 480, fps: 30))
            Issue.record("/dev/null opened as a camera")
        } catch {
            // libv4l2 asks the driver itself while opening (and fails with ENOTTY there).
            #expect(
                error.description.hasPrefix(
                    "cannot open /dev/null: not a V4L2 video device (Inappropriate ioctl for device (ENOTTY))"),
                "\(error)")
        }
    }

    @Test func anUnknownMicrophoneSaysSo() {
        do {
            _ = try ALSAMicrophone(device: "hw:CARD=VigilNoSuchCard,DEV=0", sampleRate: 48000, channels: 1)
            Issue.record("a card that does not exist opened")
        } catch {
            guard case .cannotOpen(let source, let reason) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(source == "hw:CARD=VigilNoSuchCard,DEV=0")
            #expect(reason.contains("vigil probe"), "\(reason)")
        }
    }

    @Test func lostAndStalledDevicesDescribeThemselves() {
        #expect(
            CaptureError.deviceLost(
                source: "/dev/video0", reason: "taking a frame from the driver (VIDIOC_DQBUF) failed: x"
            ).description
                == "/dev/video0 stopped working: taking a frame from the driver (VIDIOC_DQBUF) failed: x")
        #expect(
            CaptureError.stalled(source: "/dev/video0", seconds: 2).description
                == "/dev/video0 delivered nothing for 2.0 s — the device stalled (driver or firmware hang, or a loose cable)"
        )
    }
}
