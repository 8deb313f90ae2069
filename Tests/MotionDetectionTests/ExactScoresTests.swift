import Capture
import Configuration
import Media
import TestSupport
import Testing

@testable import MotionDetection

/// The detector's verdicts are a function of the frames alone, to the last bit: no reading of
/// uninitialised memory, of the clock or of the thread. Each case prints a digest of every
/// frame's exact results (`detector digest …`); make test-arm64 runs these tests built for
/// aarch64 under qemu-user and compares their digests with x86-64's, so the vectorised loops
/// (SSE2 here, NEON on a Raspberry Pi) are shown to give the same scores bit for bit.
@Suite struct ExactScoresTests {
    /// A scene with an object crossing, a light switched on and off and sensor noise, at a
    /// size for each path of the downscaler (blocks of 2, 4 and 8 pixels).
    @Test(arguments: [(320, 240, false), (640, 480, true), (1280, 720, true)])
    func exactScoresAreReproducible(width: Int, height: Int, dynamicBackground: Bool) throws {
        let first = try digest(width: width, height: height, dynamicBackground: dynamicBackground)
        let second = try digest(width: width, height: height, dynamicBackground: dynamicBackground)
        #expect(first.value == second.value, "the same frames gave other results")
        #expect(first.frames == 90)
        // The scene has motion, a light switch and quiet frames: the digest covers all three.
        #expect(first.motionFrames > 0 && first.motionFrames < first.frames, "\(first.motionFrames) motion frames")
        #expect(first.lightSwitches > 0)
        let hex = String(first.value, radix: 16)
        print(
            "detector digest \(width)x\(height)\(dynamicBackground ? " dynamic" : ""): \(hex) over \(first.frames) frames"
        )
    }

    struct Digest {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a 64
        var frames = 0
        var motionFrames = 0
        var lightSwitches = 0

        mutating func add(_ word: UInt64) {
            for shift in Swift.stride(from: 0, to: 64, by: 8) {
                value = (value ^ (word >> UInt64(shift) & 0xFF)) &* 0x100_0000_01b3
            }
        }
    }

    func digest(width: Int, height: Int, dynamicBackground: Bool) throws -> Digest {
        let s = { (seconds: Double) in Timestamp.Duration(seconds: seconds) }
        let schedule = SceneSchedule(
            objects: [SceneObject(enter: s(1.5), leave: s(4.5), path: .leftToRight(y: 0.5))],
            lightChanges: [LightChange(start: s(2.5), end: s(3), delta: 50)])
        let source = try SyntheticSource(
            scene: SyntheticScene(
                width: width, height: height, frameRate: Rational(15, 1), pixelFormat: .i420, seed: 5,
                noiseSigma: 3, schedule: schedule, duration: s(6)))
        var settings = try Settings.defaults().motion
        settings.dynamicBackground = dynamicBackground
        var detector = MotionDetector(settings: settings)
        var digest = Digest()
        while let frame = try source.nextFrame() {
            let result = detector.process(frame.luma, at: frame.timestamp)
            for value in [
                result.score, result.noise, result.pixelThreshold, result.globalChange, result.autoMasked,
            ] {
                digest.add(value.bitPattern)
            }
            digest.add((result.motion ? 1 : 0) | (result.lightSwitch ? 2 : 0) | (result.learning ? 4 : 0))
            digest.frames += 1
            if result.motion { digest.motionFrames += 1 }
            if result.lightSwitch { digest.lightSwitches += 1 }
        }
        for value in detector.reducedPicture { digest.add(UInt64(value.bitPattern)) }
        return digest
    }
}
