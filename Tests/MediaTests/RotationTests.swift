import Media
import Testing

/// `camera.rotation`'s one type: what it accepts, the sizes it gives, and the turn it makes.
@Suite struct RotationTests {
    @Test func onlyQuarterTurnsAreRotations() {
        #expect(Rotation.allCases.map(\.degrees) == [0, 90, 180, 270])
        for degrees in [0, 90, 180, 270] { #expect(Rotation(degrees: degrees)?.degrees == degrees) }
        for degrees in [-90, 45, 360, 1, 271, Int.max, Int.min] { #expect(Rotation(degrees: degrees) == nil) }
        #expect(
            Rotation.problem(degrees: 45, setting: "camera.rotation")
                == "camera.rotation = 45 is not a right angle — use 0, 90, 180 or 270")
    }

    @Test func aSidewaysTurnExchangesTheSides() {
        #expect(Rotation.none.shown(width: 640, height: 480) == (640, 480))
        #expect(Rotation.clockwise180.shown(width: 640, height: 480) == (640, 480))
        #expect(Rotation.clockwise90.shown(width: 640, height: 480) == (480, 640))
        #expect(Rotation.clockwise270.shown(width: 640, height: 480) == (480, 640))
    }

    /// A 3 × 2 plane, turned: the top-left corner goes to the top-right at 90, the bottom-right
    /// at 180, the bottom-left at 270; the inverse turn gives the plane back.
    @Test func turnsAPlaneClockwise() {
        let plane: [UInt8] = [1, 2, 3, 4, 5, 6]  // rows 1 2 3 / 4 5 6
        #expect(Rotation.none.turned(plane, width: 3, height: 2) == plane)
        #expect(Rotation.clockwise90.turned(plane, width: 3, height: 2) == [4, 1, 5, 2, 6, 3])
        #expect(Rotation.clockwise180.turned(plane, width: 3, height: 2) == [6, 5, 4, 3, 2, 1])
        #expect(Rotation.clockwise270.turned(plane, width: 3, height: 2) == [3, 6, 2, 5, 1, 4])
        for rotation in Rotation.allCases {
            let (w, h) = rotation.shown(width: 3, height: 2)
            let back = rotation.inverse.turned(rotation.turned(plane, width: 3, height: 2), width: w, height: h)
            #expect(back == plane, "\(rotation)")
        }
    }
}
