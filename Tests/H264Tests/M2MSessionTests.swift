import H264
import Media
import TestSupport
import Testing
import V4L2

/// What opening the hardware encoder says when the node is not one (the session itself is
/// proven against the kernel's vicodec in `make test-devices`).
@Suite struct M2MSessionTests {
    /// encoder.device set to something that is not an encoder: the message says which key to
    /// fix, and where the encoders are listed.
    @Test func anEncoderThatIsNotThereSaysWhatToDo() throws {
        let format = try VideoFormat(width: 64, height: 48, pixelFormat: .nv12)
        let missing = expectError(V4L2Error.self) {
            _ = try M2MSession(path: "/nonexistent/video11", format: format, coded: "H264")
        }
        #expect(
            missing?.problem.contains("`vigil probe` lists the hardware encoders") == true,
            "\(String(describing: missing))")
        let other = expectError(V4L2Error.self) {
            _ = try M2MSession(path: "/dev/null", format: format, coded: "H264")
        }
        #expect(other?.problem.contains("encoder.device must be") == true, "\(String(describing: other))")
    }
}
