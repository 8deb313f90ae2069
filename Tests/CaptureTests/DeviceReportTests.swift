import Capture
import Foundation
import Media
import TestSupport
import Testing
import V4L2

/// What `vigil probe` prints, from enumerations given as values.
@Suite struct DeviceReportTests {
    static let webcam = CameraListing(
        path: "/dev/video0",
        links: [
            "/dev/v4l/by-id/usb-046d_HD_Pro_Webcam_C920-video-index0",
            "/dev/v4l/by-path/platform-xhci-hcd.0-usb-0:1:1.0-video-index0",
        ],
        identity: VideoDeviceIdentity(
            driver: "uvcvideo", card: "HD Pro Webcam C920", busInfo: "usb-xhci-hcd.0-1",
            capabilities: [.videoCapture, .streaming]),
        formats: CameraFormatChoiceTests.webcam)

    /// The identity of a vivid node with these capabilities.
    static func vivid(_ capabilities: VideoDeviceCapabilities) -> VideoDeviceIdentity {
        VideoDeviceIdentity(driver: "vivid", card: "vivid", busInfo: "platform:vivid-000", capabilities: capabilities)
    }

    static let expectedWebcam = """
        /dev/video0 — HD Pro Webcam C920 (driver uvcvideo, usb-xhci-hcd.0-1)
          also /dev/v4l/by-id/usb-046d_HD_Pro_Webcam_C920-video-index0
          also /dev/v4l/by-path/platform-xhci-hcd.0-usb-0:1:1.0-video-index0
          formats Vigil records from (at one size and rate Vigil prefers NV12, YU12, YUYV, 422P, then converted ones):
            YUYV  YUYV 4:2:2
                  640x480     30, 15 fps
                  1280x720    10, 5 fps
                  1920x1080   5 fps
            YU12  Planar YUV 4:2:0 (converted by libv4l2)
                  640x480     30, 15 fps
                  1280x720    30, 10, 5 fps
                  1920x1080   30, 5 fps
          other formats (not used): MJPG, RGB3
          paste into the configuration (the closest to 1280x720 at 30 fps: YU12 (converted by libv4l2) 1280x720 at 30 fps):
            camera = {
              device = "/dev/v4l/by-id/usb-046d_HD_Pro_Webcam_C920-video-index0";
              width = 1280;
              height = 720;
              fps = 30.0;
            };

        """

    @Test func aWebcamWithItsModesAndAConfigurationBlock() {
        let text = DeviceReport.render(Self.webcam, request: CameraRequest(width: 1280, height: 720, fps: 30))
        #expect(text == Self.expectedWebcam)
    }

    @Test func aFractionalRateIsAFloatForTheConfiguration() {
        var vivid = CameraListing(
            path: "/dev/video0",
            identity: Self.vivid([.videoCapture, .streaming]),
            formats: CameraFormatChoiceTests.vivid)
        vivid.links = []
        let text = DeviceReport.render(vivid, request: CameraRequest(width: 1280, height: 720, fps: 30))
        #expect(text.contains("(the closest to 1280x720 at 30 fps: NV12 1280x720 at 12.5 fps):\n"))
        #expect(
            text.contains(
                "      device = \"/dev/video0\";\n      width = 1280;\n      height = 720;\n      fps = 12.5;\n"))
        #expect(text.contains("          1280x720    12.5, 10, 5 fps\n"))
        #expect(text.contains("  other formats (not used): UYVY\n"))
    }

    /// The configuration block parses as the agent's own configuration would.
    @Test func thePastedBlockIsAValidConfiguration() throws {
        let text = DeviceReport.render(Self.webcam, request: CameraRequest(width: 1280, height: 720, fps: 30))
        let block = try #require(text.range(of: "    camera = {")).lowerBound
        let snippet =
            String(text[block...]) + "\n"
            + DeviceReport.render(Self.loopback, rate: 48000, channels: 1)
            .components(separatedBy: "\n").drop { !$0.contains("audio = {") }.joined(separator: "\n")
        let dir = try TemporaryDirectory("vigil-probe")
        defer { dir.remove() }
        let path = dir.file("vigil.conf")
        try snippet.write(toFile: path, atomically: true, encoding: .utf8)
        let r = try runTool(builtExecutable("vigil"), ["check", "--config", path])
        #expect(r.status == 0, "\(r.stderr)\n\(snippet)")
        #expect(r.stdout.contains("device = \"/dev/v4l/by-id/usb-046d_HD_Pro_Webcam_C920-video-index0\";"))
        #expect(r.stdout.contains("device = \"hw:CARD=Loopback,DEV=1\";"))
    }

    @Test func aNodeThatIsNotACamera() {
        let output = CameraListing(
            path: "/dev/video1",
            identity: Self.vivid([.videoOutput, .streaming]),
            formats: [], problem: "this is a video output device, not a camera")
        #expect(
            DeviceReport.render(output, request: CameraRequest(width: 640, height: 480, fps: 30))
                == "/dev/video1 — vivid (driver vivid, platform:vivid-000)\n  this is a video output device, not a camera\n"
        )
    }

    static let loopback = MicrophoneListing(
        device: "hw:CARD=Loopback,DEV=1", card: 0, deviceNumber: 1, cardName: "Loopback", pcmName: "Loopback PCM",
        rates: 8000...192_000, channels: 1...32, takesS16LE: true)

    @Test func aMicrophoneWithItsRangesAndAConfigurationBlock() {
        #expect(
            DeviceReport.render(Self.loopback, rate: 48000, channels: 1) == """
                hw:CARD=Loopback,DEV=1 — Loopback: Loopback PCM (card 0, device 1)
                  8000 to 192000 Hz, 1 to 32 channels, 16-bit samples
                  paste into the configuration:
                    audio = {
                      enabled = true;
                      device = "hw:CARD=Loopback,DEV=1";
                      rate = 48000;
                      channels = 1;
                    };

                """)
    }

    /// A USB microphone that records only stereo at 44.1 kHz: hw: cannot take mono 48 kHz, plughw: can.
    @Test func aMicrophoneThatNeedsConversionGetsPlughw() {
        let usb = MicrophoneListing(
            device: "hw:CARD=Device,DEV=0", card: 1, deviceNumber: 0, cardName: "USB PnP Sound Device",
            pcmName: "USB Audio",
            rates: 44100...44100, channels: 2...2, takesS16LE: true)
        #expect(usb.configurationDevice(rate: 48000, channels: 1) == "plughw:CARD=Device,DEV=0")
        #expect(usb.configurationDevice(rate: 44100, channels: 2) == "hw:CARD=Device,DEV=0")
        let text = DeviceReport.render(usb, rate: 48000, channels: 1)
        #expect(text.contains("44100 Hz, 2 channel(s), 16-bit samples\n"))
        #expect(text.contains("device = \"hw:CARD=Device,DEV=0\";\n      rate = 44100;\n      channels = 2;\n"))
    }

    @Test func nothingFound() {
        let text = DeviceReport.render(
            cameras: [], microphones: [], request: CameraRequest(width: 1280, height: 720, fps: 30))
        #expect(text.contains("Cameras (V4L2)\n\n  none found (no /dev/video* node)"))
        #expect(text.contains("A Raspberry Pi camera module is listed\n  under libcamera."))
        #expect(text.contains("Microphones (ALSA capture devices)\n\n  none found"))
    }

    @Test func cameraNodesAreListedInNumericOrder() throws {
        let dir = try TemporaryDirectory("vigil-dev")
        defer { dir.remove() }
        for name in ["video10", "video2", "video0", "videoX", "media0", "video"] {
            #expect(FileManager.default.createFile(atPath: dir.file(name), contents: nil))
        }
        #expect(DeviceProbe.cameraPaths(directory: dir.path) == ["video0", "video2", "video10"].map(dir.file))
    }
}
