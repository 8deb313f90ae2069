/// How far a player turns the stored picture, clockwise, to show it upright: the camera's
/// `camera.rotation`, parsed once. The one rotation of the movie's track matrix (QuickTime), the
/// snapshot's upright JPEG (Snapshot) and the overlay's text (Overlay). The pixels the camera
/// delivers are never turned; each of those applies it where it must.
public enum Rotation: Int, Hashable, Sendable, CaseIterable {
    case none = 0
    case clockwise90 = 90
    case clockwise180 = 180
    case clockwise270 = 270

    /// `degrees` clockwise, or nil unless it is 0, 90, 180 or 270.
    public init?(degrees: Int) { self.init(rawValue: degrees) }

    public var degrees: Int { rawValue }

    /// The rotations there are, for messages: "0, 90, 180 or 270".
    public static let accepted = "0, 90, 180 or 270"

    /// What is wrong with `degrees`, which is not a rotation, as the value of `setting`.
    public static func problem(degrees: Int, setting: String) -> String {
        "\(setting) = \(degrees) is not a right angle — use \(accepted)"
    }

    /// A quarter or three-quarter turn: the picture shown is as wide as the stored one is tall.
    public var isSideways: Bool { self == .clockwise90 || self == .clockwise270 }

    /// The size of the picture shown for a stored one of `width` × `height`.
    public func shown(width: Int, height: Int) -> (width: Int, height: Int) {
        isSideways ? (height, width) : (width, height)
    }

    /// The turn that undoes this one: as far, counter-clockwise.
    public var inverse: Rotation {
        switch self {
        case .none: .none
        case .clockwise90: .clockwise270
        case .clockwise180: .clockwise180
        case .clockwise270: .clockwise90
        }
    }

    /// Writes the `width`×`height` plane at `source`, turned clockwise as this says, into
    /// `destination`: `height`×`width` when sideways, `width`×`height` otherwise.
    /// Reads in row order; the writes go down the columns of the turned plane.
    public func turn(
        _ source: UnsafePointer<UInt8>, width: Int, height: Int, into destination: UnsafeMutablePointer<UInt8>
    ) {
        for y in 0..<height {
            let row = source + y * width
            switch self {
            case .clockwise90:
                // Source (x, y) lands at (height − 1 − y, x) of a plane `height` wide.
                let column = destination + (height - 1 - y)
                for x in 0..<width { column[x * height] = row[x] }
            case .clockwise180:
                let mirrored = destination + (height - 1 - y) * width + (width - 1)
                for x in 0..<width { mirrored[-x] = row[x] }
            case .clockwise270:
                // Source (x, y) lands at (y, width − 1 − x) of a plane `height` wide.
                let column = destination + (width - 1) * height + y
                for x in 0..<width { column[-x * height] = row[x] }
            case .none:
                (destination + y * width).update(from: row, count: width)
            }
        }
    }

    /// `pixels`, `width` × `height` row by row, turned clockwise as this says (see `turn`).
    public func turned(_ pixels: [UInt8], width: Int, height: Int) -> [UInt8] {
        guard self != .none, pixels.count == width * height else { return pixels }
        return [UInt8](unsafeUninitializedCapacity: pixels.count) { buffer, count in
            guard let destination = buffer.baseAddress else { return }
            pixels.withUnsafeBufferPointer { source in
                guard let source = source.baseAddress else { return }
                turn(source, width: width, height: height, into: destination)
            }
            count = pixels.count
        }
    }
}
