import Capture
import Foundation
import Media

// Synthetic footage with known events, for the tests that record it (through the agent in
// process, or through `vigil run` reading it from a file).

/// A scene at 320×240 with the given objects, I420 (what a Y4M file holds).
public func scene(
    seconds: Double, rate: Rational = Rational(15, 1), width: Int = 320, height: Int = 240,
    objects: [SceneObject], period: Double? = nil
) -> SyntheticScene {
    SyntheticScene(
        width: width, height: height, frameRate: rate, pixelFormat: .i420, seed: 11, noiseSigma: 3,
        schedule: SceneSchedule(objects: objects, period: period.map { .init(seconds: $0) }),
        duration: .init(seconds: seconds))
}

/// Something crossing the picture from `enter` to `leave` seconds.
public func crossing(_ enter: Double, _ leave: Double) -> SceneObject {
    SceneObject(
        enter: .init(seconds: enter), leave: .init(seconds: leave), path: .leftToRight(y: 0.5), width: 0.15,
        height: 0.25, brightness: 210)
}

/// Writes `scene` to a Y4M file at `path`.
@discardableResult
public func writeFootage(_ scene: SyntheticScene, to path: String) throws -> String {
    let source = try SyntheticSource(scene: scene)
    let writer = try Y4MFileWriter(path: path, width: scene.width, height: scene.height, rate: scene.frameRate)
    while let frame = try source.nextFrame() { try writer.write(frame) }
    try writer.close()
    return path
}

/// The clip files (`.mov`) under `directory`, relative to it, sorted.
public func movieFiles(in directory: String) -> [String] {
    guard let walker = FileManager.default.enumerator(atPath: directory) else { return [] }
    return walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".mov") }.sorted()
}
