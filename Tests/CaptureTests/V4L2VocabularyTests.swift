import Capture
import Glibc
import Media
import Testing
import V4L2

/// The one V4L2 layer's words: what a node is, and what an error number means for a camera
/// and for the hardware encoder.
@Suite struct V4L2VocabularyTests {
    /// A codec on the multi-planar API (the Pi's bcm2835-codec, venus, vicodec's second node)
    /// says only V4L2_CAP_VIDEO_M2M_MPLANE.
    @Test func aMultiplanarCodecIsAMemoryToMemoryDevice() {
        let codec = VideoDeviceCapabilities(rawValue: 0x0000_4000 | 0x0400_0000)
        #expect(codec.kind == "a memory-to-memory device (a codec or converter)")
        #expect(!codec.isCamera)
        #expect(codec.memoryToMemoryIsMultiplanar == true)
        let single = VideoDeviceCapabilities([.memoryToMemory, .streaming])
        #expect(single.memoryToMemoryIsMultiplanar == false)
        #expect(VideoDeviceCapabilities([.videoCapture, .streaming]).memoryToMemoryIsMultiplanar == nil)
    }

    @Test func theSameNumberGetsAdviceForWhatTheDeviceIs() {
        let camera = V4L2Call.requestBuffers.meaning(of: ENOMEM, device: "/dev/video0", role: .camera)
        let encoder = V4L2Call.requestBuffers.meaning(of: ENOMEM, device: "/dev/video11", role: .encoder)
        #expect(camera.contains("ask for a smaller picture"), "\(camera)")
        #expect(encoder.contains("cma="), "\(encoder)")
        let gone = V4L2Call.dequeueBuffer.meaning(of: ENODEV, device: "/dev/video11", role: .encoder)
        #expect(gone.hasPrefix("the device is gone") && gone.contains("driver unloaded"), "\(gone)")
        #expect(!gone.contains("camera"), "\(gone)")
    }

    @Test func anEncoderErrorNamesTheDeviceTheCallAndTheProblem() {
        let failed = V4L2Error(device: "/dev/video11", call: .requestBuffers, code: ENOMEM, role: .encoder)
        #expect(failed.description.hasPrefix("/dev/video11: requesting buffers (VIDIOC_REQBUFS) failed: out of memory"))
        let refused = V4L2Error(
            device: "/dev/video11", call: .enumerateFormats, role: .encoder, problem: "it encodes FWHT")
        #expect(refused.description == "/dev/video11: it encodes FWHT")
        #expect(!refused.meansDeviceLost)
    }
}
