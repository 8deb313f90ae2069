import Testing

@testable import MotionDetection

@Suite struct PGMTests {
    static func p5(width: Int, height: Int, maxValue: Int = 255, header: String? = nil, _ pixels: [Int]) -> [UInt8] {
        let text = header ?? "P5\n\(width) \(height)\n\(maxValue)\n"
        var bytes = Array(text.utf8)
        for p in pixels {
            if maxValue < 256 { bytes.append(UInt8(p)) } else { bytes += [UInt8(p >> 8), UInt8(p & 0xFF)] }
        }
        return bytes
    }

    @Test func binary() throws {
        let mask = try MotionMask(pgm: Self.p5(width: 3, height: 2, [0, 255, 128, 127, 255, 0]), source: "m.pgm")
        #expect(mask.width == 3 && mask.height == 2)
        #expect(mask.watched == [false, true, true, false, true, false])
    }

    @Test func binarySixteenBit() throws {
        let mask = try MotionMask(
            pgm: Self.p5(width: 2, height: 2, maxValue: 1000, [0, 1000, 500, 499]), source: "m.pgm")
        #expect(mask.watched == [false, true, true, false])
    }

    @Test func asciiWithComments() throws {
        let text = "P2\n# made by hand\n4 1 # width height\n15\n0 15\n# more\n 8 7\n"
        let mask = try MotionMask(pgm: Array(text.utf8), source: "m.pgm")
        #expect(mask.watched == [false, true, true, false])
    }

    @Test func commentInBinaryHeader() throws {
        let bytes = Self.p5(width: 2, height: 1, header: "P5 # c\n2 1\n# c\n255\n", [255, 0])
        #expect(try MotionMask(pgm: bytes, source: "m.pgm").watched == [true, false])
    }

    @Test(arguments: [
        ("", "too short"),
        ("P6\n1 1\n255\n\u{0}\u{0}\u{0}", "P6 Netpbm file"),
        ("GIF89a", "not a PGM image"),
        ("P5\n0 4\n255\n", "needs at least one pixel"),
        ("P5\n2 2\n70000\n", "maximum value is 70000"),
        ("P5\n2 2\n255\n\u{1}\u{2}", "truncated"),
        ("P2\n2 2\n255\n0 255 0", "truncated"),
        ("P2\n2 1\n100\n0 101", "pixel 1 is not a number from 0 to 100"),
        ("P2\n2 1\n255\n0 x", "pixel 1 is not a number"),
        ("P5\nwide 2\n255\n", "width is not a number"),
        ("P5\n2 1\n255\n\u{0}\u{0}", "black everywhere"),
        ("P5\n100000 100000\n255\n", "larger than"),
    ])
    func malformed(text: String, expected: String) {
        do {
            _ = try MotionMask(pgm: Array(text.utf8), source: "garden.pgm")
            Issue.record("parsed \(text.debugDescription)")
        } catch {
            #expect(error.description.contains("garden.pgm"), "\(error)")
            #expect(error.description.contains(expected), "\(error)")
            #expect(error.description.contains(" — "), "no fix given: \(error)")
        }
    }

    /// Every prefix of valid files is rejected with an error, never a crash.
    @Test func truncatedByteByByte() {
        let files = [
            Self.p5(width: 5, height: 3, Array(repeating: 255, count: 15)),
            Self.p5(width: 2, height: 2, maxValue: 4000, [4000, 0, 4000, 0]),
            Array("P2\n# comment\n3 2\n255\n255 0 255\n0 255 0\n".utf8),
        ]
        for file in files {
            #expect((try? MotionMask(pgm: file, source: "m")) != nil)
            for cut in 0..<file.count {
                let prefix = Array(file[0..<cut])
                // An ASCII file cut after whitespace that ends a complete last sample is whole.
                if let mask = try? MotionMask(pgm: prefix, source: "m") {
                    #expect(
                        file[0] == UInt8(ascii: "P") && file[1] == UInt8(ascii: "2") && cut >= file.count - 2,
                        "a \(cut)-byte prefix parsed as \(mask.width)×\(mask.height)")
                }
            }
        }
    }

    /// Corrupting any byte of a valid file gives an error or a mask, never a crash.
    @Test func corruptedByteByByte() {
        let files = [
            Self.p5(width: 4, height: 3, Array(repeating: 200, count: 12)),
            Array("P2\n3 2\n255\n255 0 255\n0 255 0\n".utf8),
        ]
        var rejected = 0
        for file in files {
            for i in 0..<file.count {
                for value: UInt8 in [0, 0x20, UInt8(ascii: "#"), UInt8(ascii: "9"), 0xFF] {
                    var bytes = file
                    bytes[i] = value
                    if (try? MotionMask(pgm: bytes, source: "m")) == nil { rejected += 1 }
                }
            }
        }
        #expect(rejected > 0)
    }
}

@Suite struct MaskScalingTests {
    @Test func upscaleKeepsRegions() throws {
        let mask = try MotionMask(width: 2, height: 2, watched: [true, false, false, true])
        let scaled = mask.scaled(toWidth: 4, height: 4)
        #expect(
            scaled == [
                1, 1, 0, 0,
                1, 1, 0, 0,
                0, 0, 1, 1,
                0, 0, 1, 1,
            ])
    }

    /// Downscaling by area: a target pixel is watched when at least half its area is.
    @Test func downscaleByArea() throws {
        // 8×2: columns 0–2 white (3 of the first 4), column 6 white (1 of the last 4).
        let row = [true, true, true, false, false, false, true, false]
        let mask = try MotionMask(width: 8, height: 2, watched: row + row)
        #expect(mask.scaled(toWidth: 2, height: 1) == [1, 0])
    }

    /// Any size maps onto any detection size; the watched share is kept roughly.
    @Test(arguments: [(640, 480, 160, 120), (100, 37, 160, 90), (1920, 1080, 160, 90), (3, 3, 160, 120)])
    func anySize(mw: Int, mh: Int, tw: Int, th: Int) throws {
        let watched = (0..<(mw * mh)).map { ($0 % mw) * 3 < mw }  // left third
        let mask = try MotionMask(width: mw, height: mh, watched: watched)
        let scaled = mask.scaled(toWidth: tw, height: th)
        #expect(scaled.count == tw * th)
        let share = Double(scaled.filter { $0 == 1 }.count) / Double(tw * th)
        #expect(abs(share - mask.watchedFraction) < 0.2, "share \(share), mask \(mask.watchedFraction)")
        // Rows are identical (the mask only varies across).
        #expect(Array(scaled[0..<tw]) == Array(scaled[(th - 1) * tw..<(th * tw)]))
    }

    /// A white area too small to cover half a target pixel is still watched.
    @Test func tinyWatchedArea() throws {
        var watched = [Bool](repeating: false, count: 400 * 400)
        watched[200 * 400 + 200] = true
        let mask = try MotionMask(width: 400, height: 400, watched: watched)
        let scaled = mask.scaled(toWidth: 10, height: 10)
        #expect(scaled.filter { $0 == 1 }.count == 1)
    }

    @Test func flagsMustMatchSize() {
        #expect(throws: MaskError.self) { try MotionMask(width: 3, height: 3, watched: [true]) }
        #expect(throws: MaskError.self) { try MotionMask(width: 1, height: 1, watched: [false]) }
    }
}
