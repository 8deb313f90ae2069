import Media
import POSIX
import TestSupport
import Testing

@testable import Capture

@Suite struct LibcameraSpecifierTests {
    @Test func namesTheFirstCameraOrOneByItsID() throws {
        #expect(try SourceSpecifier(parsing: "libcamera") == .libcamera(camera: nil))
        let id = "/base/soc/i2c0mux/i2c@1/imx708@1a"
        #expect(try SourceSpecifier(parsing: "libcamera:" + id) == .libcamera(camera: id))
        // vimc's id has colons and a dot in it: everything after the first "libcamera:" is the id.
        #expect(
            try SourceSpecifier(parsing: "libcamera:platform/vimc.0 Sensor B")
                == .libcamera(camera: "platform/vimc.0 Sensor B"))
        #expect(SourceSpecifier.libcamera(camera: nil).description == "libcamera")
        #expect(SourceSpecifier.libcamera(camera: id).description == "libcamera:" + id)
        #expect(SourceSpecifier.libcamera(camera: nil).isCamera && SourceSpecifier.device(path: "/dev/video0").isCamera)
        #expect(!SourceSpecifier.synthetic.isCamera && !SourceSpecifier.file(path: "a.y4m").isCamera)
    }

    @Test func anEmptyIDIsRefusedWithTheForms() {
        let error = expectError(CaptureError.self) { try SourceSpecifier(parsing: "libcamera:") }
        #expect(error?.description.contains("needs a camera id after it") == true)
        let other = expectError(CaptureError.self) { try SourceSpecifier(parsing: "camera0") }
        #expect(other?.description.contains("'libcamera' (a Raspberry Pi camera module)") == true)
    }
}

@Suite struct LibcameraLayoutTests {
    typealias Plane = LibcameraLayout.Plane

    /// Raspberry Pi's ISP: NV12 1280x720, stride 1280, both planes in one dmabuf.
    @Test func nv12InOneBufferIsTakenAsItIs() throws {
        let buffers = (0..<4).map { fd in
            [
                Plane(descriptor: Int32(20 + fd), offset: 0, length: 1280 * 720),
                Plane(descriptor: Int32(20 + fd), offset: 1280 * 720, length: 1280 * 360),
            ]
        }
        let plan = try LibcameraLayout.plan(
            source: .yuv(.nv12), width: 1280, height: 720, stride: 1280, buffers: buffers,
            frameRate: Rational(30, 1))
        guard case .direct(let format, let length) = plan else {
            Issue.record("expected a direct plan, got \(plan)")
            return
        }
        #expect(length == 1280 * 720 * 3 / 2)
        #expect(format.pixelFormat == .nv12 && format.width == 1280 && format.height == 720)
        #expect(format.planes[0] == PlaneLayout(offset: 0, stride: 1280, bytesPerRow: 1280, rows: 720))
        #expect(format.planes[1] == PlaneLayout(offset: 1280 * 720, stride: 1280, bytesPerRow: 1280, rows: 360))
        #expect(format.frameRate == Rational(30, 1))
    }

    /// YUV420 with a padded stride (a 1296-wide row for 1280 pixels), chroma at half the stride.
    @Test func paddedI420KeepsItsStrides() throws {
        let y = 1296 * 720
        let c = 648 * 360
        let buffers = [
            [
                Plane(descriptor: 9, offset: 0, length: y), Plane(descriptor: 9, offset: y, length: c),
                Plane(descriptor: 9, offset: y + c, length: c),
            ]
        ]
        let plan = try LibcameraLayout.plan(
            source: .yuv(.i420), width: 1280, height: 720, stride: 1296, buffers: buffers, frameRate: nil)
        guard case .direct(let format, _) = plan else {
            Issue.record("expected a direct plan, got \(plan)")
            return
        }
        #expect(format.planes.map(\.stride) == [1296, 648, 648])
        #expect(format.planes.map(\.offset) == [0, y, y + c])
    }

    /// A buffer described as one plane holding the whole frame: the planes follow one another.
    @Test func oneDescribedPlaneIsSplitByTheStride() throws {
        let plan = try LibcameraLayout.plan(
            source: .yuv(.nv12), width: 640, height: 480, stride: 640,
            buffers: [[Plane(descriptor: 3, offset: 0, length: 640 * 480 * 3 / 2)]], frameRate: nil)
        guard case .direct(let format, _) = plan else {
            Issue.record("expected a direct plan, got \(plan)")
            return
        }
        #expect(format.planes.map(\.offset) == [0, 640 * 480])
    }

    @Test func planesInSeparateBuffersAreCopied() throws {
        let buffers = [
            [
                Plane(descriptor: 3, offset: 0, length: 640 * 480), Plane(descriptor: 4, offset: 0, length: 640 * 240),
            ]
        ]
        let plan = try LibcameraLayout.plan(
            source: .yuv(.nv12), width: 640, height: 480, stride: 640, buffers: buffers, frameRate: nil)
        guard case .copy(let source, let format, let reason) = plan else {
            Issue.record("expected a copy, got \(plan)")
            return
        }
        #expect(source == .yuv(.nv12) && format.pixelFormat == .nv12 && reason == "the planes lie in separate buffers")
        #expect(format.planes.map(\.stride) == [640, 640])
    }

    /// vimc's pipeline delivers RGB only: converted into I420.
    @Test func rgbIsConverted() throws {
        #expect(LibcameraLayout.Source(libcameraName: "RGB888") == .rgb(.bgr24))
        #expect(LibcameraLayout.Source(libcameraName: "BGR888") == .rgb(.rgb24))
        #expect(LibcameraLayout.Source(libcameraName: "YUYV") == nil)
        let plan = try LibcameraLayout.plan(
            source: .rgb(.bgr24), width: 640, height: 480, stride: 1920,
            buffers: [[Plane(descriptor: 3, offset: 0, length: 1920 * 480)]], frameRate: nil)
        guard case .copy(_, let format, _) = plan else {
            Issue.record("expected a copy, got \(plan)")
            return
        }
        #expect(format.pixelFormat == .i420 && format.width == 640)
    }

    @Test func aBufferTooSmallIsRefused() {
        let error = expectError(VideoFormatError.self) {
            try LibcameraLayout.plan(
                source: .yuv(.nv12), width: 640, height: 480, stride: 640,
                buffers: [[Plane(descriptor: 3, offset: 0, length: 640 * 480)]], frameRate: nil)
        }
        #expect(error?.problem == "a frame needs 460800 bytes, the camera's buffer has 307200")
    }

    /// BT.601 limited range: white is Y 235, red Y 82 U 90 V 240, chroma averaged over 2×2.
    @Test func rgbToI420() throws {
        let format = try VideoFormat(width: 4, height: 2, pixelFormat: .i420)
        let buffer = FrameBuffer(capacity: format.bufferSize)
        // RGB888 is B, G, R in memory: the left 2×2 white, the right 2×2 red; rows padded to 16.
        var bytes = [UInt8](repeating: 0, count: 16 * 2)
        for row in 0..<2 {
            for x in 0..<4 {
                let pixel: [UInt8] = x < 2 ? [255, 255, 255] : [0, 0, 255]
                for k in 0..<3 { bytes[row * 16 + x * 3 + k] = pixel[k] }
            }
        }
        bytes.withUnsafeBufferPointer { raw in
            LibcameraLayout.copy(
                .rgb(.bgr24), planes: [raw.baseAddress!], strides: [16], into: buffer, format: format)
        }
        let frame = VideoFrame(format: format, buffer: buffer, timestamp: .zero, sequence: 0)
        #expect(Array(frame.plane(0).row(0)) == [235, 235, 82, 82])
        #expect(Array(frame.plane(1).row(0)) == [128, 90])
        #expect(Array(frame.plane(2).row(0)) == [128, 240])
    }

    @Test func paddedYUVIsCopiedTight() throws {
        let format = try VideoFormat(width: 4, height: 2, pixelFormat: .nv12)
        let buffer = FrameBuffer(capacity: format.bufferSize)
        let luma: [UInt8] = [1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8, 0, 0, 0, 0]
        let chroma: [UInt8] = [9, 10, 11, 12, 0, 0, 0, 0]
        luma.withUnsafeBufferPointer { y in
            chroma.withUnsafeBufferPointer { c in
                LibcameraLayout.copy(
                    .yuv(.nv12), planes: [y.baseAddress!, c.baseAddress!], strides: [8, 8], into: buffer,
                    format: format)
            }
        }
        #expect(Array(UnsafeBufferPointer(start: buffer.base, count: 12)) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
    }
}

@Suite struct LibcameraTimestampTests {
    let monotonic = Timestamp(nanoseconds: 5_000_000_000_000)
    /// Suspended for an hour: CLOCK_BOOTTIME is an hour ahead.
    let boottime = Timestamp(nanoseconds: 5_000_000_000_000 + 3_600_000_000_000)

    @Test func aMonotonicSensorTimestampIsTakenAsItIs() {
        let sensor = monotonic.nanoseconds - 20_000_000
        #expect(
            LibcameraLayout.captureTime(
                sensor: sensor, buffer: 0, monotonicNow: monotonic, boottimeNow: boottime)
                == Timestamp(nanoseconds: sensor))
    }

    @Test func aBoottimeSensorTimestampIsMovedOntoTheMonotonicClock() {
        let sensor = boottime.nanoseconds - 20_000_000
        #expect(
            LibcameraLayout.captureTime(
                sensor: sensor, buffer: 0, monotonicNow: monotonic, boottimeNow: boottime)
                == Timestamp(nanoseconds: monotonic.nanoseconds - 20_000_000))
    }

    @Test func withoutASensorTimestampTheBuffersIsUsed() {
        let buffer = monotonic.nanoseconds - 33_000_000
        #expect(
            LibcameraLayout.captureTime(sensor: nil, buffer: buffer, monotonicNow: monotonic, boottimeNow: boottime)
                == Timestamp(nanoseconds: buffer))
    }

    @Test func zeroOrAForeignClockGivesTheDequeueTime() {
        #expect(
            LibcameraLayout.captureTime(sensor: 0, buffer: 0, monotonicNow: monotonic, boottimeNow: boottime)
                == monotonic)
        #expect(
            LibcameraLayout.captureTime(sensor: 42, buffer: 0, monotonicNow: monotonic, boottimeNow: boottime)
                == monotonic)
        // A timestamp from the future on both clocks is not trusted either.
        #expect(
            LibcameraLayout.captureTime(
                sensor: boottime.nanoseconds + 1_000_000_000, buffer: 0, monotonicNow: monotonic,
                boottimeNow: boottime) == monotonic)
    }
}

@Suite struct LibcameraPluginTests {
    @Test func theABIMustMatch() {
        #expect(LibcameraPlugin.check(abi: 1, tableSize: 96, expected: 1, expectedSize: 96) == nil)
        #expect(LibcameraPlugin.check(abi: 1, tableSize: 120, expected: 1, expectedSize: 96) == nil)
        #expect(
            LibcameraPlugin.check(abi: 2, tableSize: 96, expected: 1, expectedSize: 96)
                == "speaks plugin ABI 2, this vigil speaks 1")
        #expect(
            LibcameraPlugin.check(abi: 1, tableSize: 64, expected: 1, expectedSize: 96)
                == "has a table of 64 bytes, this vigil needs 96")
    }

    @Test func isLookedForBesideTheBinaryThenWhereThePackagePutsIt() {
        let paths = LibcameraPlugin.candidates(override: nil, executable: "/opt/vigil/bin/vigil")
        #expect(paths.first == "/opt/vigil/bin/libvigil-libcamera.so")
        #expect(paths.last == "/usr/lib/vigil/libvigil-libcamera.so")
        #expect(paths.contains { $0.hasSuffix("-linux-gnu/vigil/libvigil-libcamera.so") })
        #expect(LibcameraPlugin.candidates(override: "/tmp/p.so", executable: "/usr/bin/vigil") == ["/tmp/p.so"])
    }

    @Test func aMissingPluginSaysWhatToInstall() {
        let error = expectError(LibcameraPluginError.self) {
            try LibcameraPlugin.load(candidates: ["/nonexistent/libvigil-libcamera.so"])
        }
        #expect(
            error?.description
                == "camera.device = libcamera needs the vigil-libcamera package — apt install vigil-libcamera (no plugin at /nonexistent/libvigil-libcamera.so)"
        )
    }

    /// A shared object that is not the plugin (no entry symbol) is refused with the linker's words.
    @Test func aLibraryThatIsNotThePluginIsRefused() throws {
        let libc = try #require(
            ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6"].first(where: {
                fileExists(atPath: $0)
            }))
        let error = expectError(LibcameraPluginError.self) { try LibcameraPlugin.load(candidates: [libc]) }
        guard case .unloadable(let path, let reason)? = error else {
            Issue.record("expected unloadable, got \(String(describing: error))")
            return
        }
        #expect(path == libc && reason.contains("vigil_libcamera_plugin"))
    }

    /// The plugin this tree builds (beside the test bundle) loads and speaks this binary's ABI,
    /// and libcamera's camera manager starts through it.
    @Test func theBuiltPluginLoadsAndLists() throws {
        let executable = try #require(executablePath())
        let directory = String(executable[..<(executable.lastIndex(of: "/") ?? executable.endIndex)])
        let plugin = try LibcameraPlugin.load(candidates: [directory + "/libvigil-libcamera.so"])
        #expect(plugin.libcameraVersion.split(separator: ".").count == 3)
        guard case .success = LibcameraProbe.cameras() else {
            Issue.record("listing libcamera's cameras failed: \(LibcameraProbe.cameras())")
            return
        }
    }
}

/// LibcameraSource over the stand-in plugin of Tests/Fixtures/FakeLibcamera (NV12 in memfd
/// buffers; each frame's luma is its sequence number).
@Suite struct LibcameraSourceTests {
    func open(_ id: String) throws -> LibcameraSource {
        let executable = try #require(executablePath())
        let directory = String(executable[..<(executable.lastIndex(of: "/") ?? executable.endIndex)])
        let fake = Result { () throws(LibcameraPluginError) in
            try LibcameraPlugin.load(candidates: [directory + "/libvigil-libcamera-fake.so"])
        }
        return try LibcameraSource(
            camera: id, request: CameraRequest(width: 320, height: 240, fps: 100), bufferCount: 3,
            stallTimeout: .init(seconds: 5), plugin: fake)
    }

    /// The Pi's ISP puts both planes in one buffer: a frame is that buffer, and the buffer goes
    /// back to the camera when the frame is dropped.
    @Test func framesAreTheCamerasOwnBuffers() throws {
        let camera = try open("one-buffer")
        #expect(camera.name == "libcamera:one-buffer")
        #expect(camera.negotiation.copied == nil)
        #expect(camera.format.pixelFormat == .nv12 && camera.format.planes.map(\.offset) == [0, 320 * 240])
        let before = Clock.monotonic.now()
        var held = try (0..<3).map { _ in try #require(try camera.nextFrame()) }
        let after = Clock.monotonic.now()
        #expect(held.map(\.sequence) == [0, 1, 2])
        #expect(held.map { $0.luma.row(0)[0] } == [0, 1, 2])
        // Stamped on the monotonic clock, in order, while they were taken (a grid tick of 10 ms
        // may put one up to a quarter of a tick later).
        #expect(zip(held, held.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp })
        #expect(
            held.allSatisfy { $0.timestamp >= before && $0.timestamp <= after + .init(seconds: 0.01) })
        // All three buffers are held: the next frame comes only in the one dropped first.
        let first = UInt(bitPattern: held[0].buffer.base)
        held.removeFirst()
        let next = try #require(try camera.nextFrame())
        #expect(UInt(bitPattern: next.buffer.base) == first)
        #expect(next.sequence == 3 && next.luma.row(0)[0] == 3)
        #expect(camera.lostFrames == 0)
    }

    /// Planes in buffers of their own are copied, so frames can be held longer than the
    /// camera has buffers.
    @Test func planesInSeparateBuffersAreCopied() throws {
        let camera = try open("split-planes")
        #expect(camera.negotiation.copied == "the planes lie in separate buffers")
        let held = try (0..<8).map { _ in try #require(try camera.nextFrame()) }
        #expect(held.map { $0.luma.row(0)[0] } == (0..<8).map { UInt8($0) })
        let tight = try VideoFormat(width: 320, height: 240, pixelFormat: .nv12, frameRate: Rational(100, 1))
        #expect(held.allSatisfy { $0.format == tight })
    }

    /// An unplugged camera ends the stream as a lost device: the agent closes the clip and retries.
    @Test func anUnpluggedCameraIsLost() throws {
        let camera = try open("gone-after-2")
        _ = try camera.nextFrame()
        _ = try camera.nextFrame()
        let error = expectError(CaptureError.self) { _ = try camera.nextFrame() }
        #expect(error == .deviceLost(source: "libcamera:gone-after-2", reason: "the fake camera was unplugged"))
        // And it stays so: the stream is closed.
        let again = expectError(CaptureError.self) { _ = try camera.nextFrame() }
        guard case .deviceLost? = again else {
            Issue.record("expected deviceLost, got \(String(describing: again))")
            return
        }
    }

    @Test func anUnknownCameraCannotBeOpened() {
        let error = expectError(CaptureError.self) { _ = try open("no-such") }
        #expect(error == .cannotOpen(source: "libcamera:no-such", reason: "the fake has no such camera"))
    }
}
